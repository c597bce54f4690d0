/* Standard Clock patience in plain C: the anchors the kernel's speed is measured against.
 *
 * The deal scheme is clocksweep's (docs/deals.md): Philox4x32-10 under key = seed, counter
 * (deal lo, deal hi, block, stream 0); Fisher-Yates's ranges 52..2 drawn four to a 32-bit
 * word by Lemire's multiply-shift, a word rejected when its last leftover falls under
 * 2**32 mod the batch's product; the ranks of the ordered deck shuffled; the round-robin
 * layout; standard play from the centre. It prints the wins and the cards turned over the
 * range, which must be the kernel's for the same deals, and the seconds spent playing.
 *
 *   clock plain SEED FIRST COUNT      one deal at a time
 *   clock lockstep SEED FIRST COUNT   eight deals side by side, as the kernel plays them
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LANES 8
#define CENTRE 12
#define BATCHES 13

static const uint64_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
static uint64_t ranges[BATCHES * 4], thresholds[BATCHES];
static uint8_t position[52]; /* pile q's card k from the top: deck position */

static void philox(uint64_t seed, uint64_t deal, uint64_t block, uint64_t out[4]) {
    uint64_t c0 = deal & 0xFFFFFFFFu, c1 = deal >> 32, c2 = block, c3 = 0;
    uint64_t k0 = seed & 0xFFFFFFFFu, k1 = seed >> 32;
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = M0 * c0, p1 = M1 * c2;
        c0 = (p1 >> 32) ^ c1 ^ k0;
        c1 = p1 & 0xFFFFFFFFu;
        c2 = (p0 >> 32) ^ c3 ^ k1;
        c3 = p0 & 0xFFFFFFFFu;
        k0 = (k0 + W0) & 0xFFFFFFFFu;
        k1 = (k1 + W1) & 0xFFFFFFFFu;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

static void tables(void) {
    for (int b = 0; b < BATCHES; b++) {
        uint64_t product = 1;
        for (int k = 0; k < 4; k++) {
            int n = 52 - (b * 4 + k);
            ranges[b * 4 + k] = n >= 2 ? (uint64_t)n : 1; /* the last batch padded with 1s */
            product *= ranges[b * 4 + k];
        }
        thresholds[b] = (1ull << 32) % product;
    }
    for (int q = 0; q < 13; q++)
        for (int k = 0; k < 4; k++) position[q * 4 + k] = (uint8_t)((3 - k) * 13 + q);
}

/* The Lemire digits of a batch from one word; gives the leftover. */
static inline uint64_t decode(uint64_t word, int b, uint8_t *draws) {
    for (int k = 0; k < 4; k++) {
        uint64_t scaled = word * ranges[b * 4 + k];
        draws[b * 4 + k] = (uint8_t)(scaled >> 32);
        word = scaled & 0xFFFFFFFFu;
    }
    return word;
}

/* Every batch from the next unused word, in order: the scheme as written. */
static void draws_in_order(uint64_t seed, uint64_t deal, uint8_t *draws) {
    uint64_t words[4];
    int next = 0;
    philox(seed, deal, 0, words);
    for (int b = 0; b < BATCHES; b++) {
        for (;;) {
            if (next > 0 && (next & 3) == 0) philox(seed, deal, (uint64_t)(next >> 2), words);
            uint64_t word = words[next & 3];
            next++;
            if (decode(word, b, draws) >= thresholds[b]) break;
        }
    }
}

static void deal_ranks(const uint8_t *draws, uint8_t *ranks) {
    for (int i = 0; i < 52; i++) ranks[i] = (uint8_t)(i >> 2);
    for (int r = 0; r < 51; r++) {
        int i = 51 - r, j = draws[r];
        uint8_t t = ranks[i];
        ranks[i] = ranks[j];
        ranks[j] = t;
    }
}

/* Standard play of one layout: the cards turned (52: won). */
static int play(const uint8_t *ranks) {
    uint8_t piles[52], taken[13] = {0};
    for (int k = 0; k < 52; k++) piles[k] = ranks[position[k]];
    int card = CENTRE, turned = 0;
    for (;;) {
        int slot = taken[card];
        if (slot == 4) return turned;
        taken[card] = (uint8_t)(slot + 1);
        turned++;
        card = piles[card * 4 + slot];
    }
}

static void plain(uint64_t seed, uint64_t first, uint64_t count, uint64_t *wins, uint64_t *cards) {
    uint8_t draws[52], ranks[52];
    for (uint64_t d = 0; d < count; d++) {
        draws_in_order(seed, first + d, draws);
        deal_ranks(draws, ranks);
        int turned = play(ranks);
        *wins += turned == 52;
        *cards += (uint64_t)turned;
    }
}

/* Eight deals at a time: their first four Philox blocks in loops over the lanes (which the
 * compiler turns into vector instructions), the fast path's batches decoded each from its
 * own word (a lane with a rejected word decoded again in order), the swaps side by side, and
 * the chains stepped together with no branch: a chain that has died stays where it died. */
static void lockstep(uint64_t seed, uint64_t first, uint64_t count, uint64_t *wins,
                     uint64_t *cards) {
    uint64_t words[16][LANES];
    uint8_t draws[LANES][52], ranks[LANES][52], piles[LANES][56], taken[LANES][13];
    for (uint64_t d0 = 0; d0 < count; d0 += LANES) {
        for (int block = 0; block < 4; block++) {
            uint64_t c0[LANES], c1[LANES], c2[LANES], c3[LANES];
            for (int l = 0; l < LANES; l++) {
                uint64_t deal = first + d0 + (uint64_t)l;
                c0[l] = deal & 0xFFFFFFFFu, c1[l] = deal >> 32, c2[l] = (uint64_t)block, c3[l] = 0;
            }
            uint64_t k0 = seed & 0xFFFFFFFFu, k1 = seed >> 32;
            for (int r = 0; r < 10; r++) {
                for (int l = 0; l < LANES; l++) {
                    uint64_t p0 = M0 * c0[l], p1 = M1 * c2[l];
                    uint64_t n0 = (p1 >> 32) ^ c1[l] ^ k0, n2 = (p0 >> 32) ^ c3[l] ^ k1;
                    c1[l] = p1 & 0xFFFFFFFFu, c3[l] = p0 & 0xFFFFFFFFu, c0[l] = n0, c2[l] = n2;
                }
                k0 = (k0 + W0) & 0xFFFFFFFFu;
                k1 = (k1 + W1) & 0xFFFFFFFFu;
            }
            for (int l = 0; l < LANES; l++) {
                words[block * 4][l] = c0[l], words[block * 4 + 1][l] = c1[l];
                words[block * 4 + 2][l] = c2[l], words[block * 4 + 3][l] = c3[l];
            }
        }
        for (int l = 0; l < LANES; l++) {
            int rejected = 0;
            for (int b = 0; b < BATCHES; b++)
                rejected |= decode(words[b][l], b, draws[l]) < thresholds[b];
            if (rejected) draws_in_order(seed, first + d0 + (uint64_t)l, draws[l]);
            for (int i = 0; i < 52; i++) ranks[l][i] = (uint8_t)(i >> 2);
        }
        for (int r = 0; r < 51; r++) {
            int i = 51 - r;
            for (int l = 0; l < LANES; l++) {
                int j = draws[l][r];
                uint8_t t = ranks[l][i];
                ranks[l][i] = ranks[l][j];
                ranks[l][j] = t;
            }
        }
        for (int l = 0; l < LANES; l++) {
            for (int k = 0; k < 52; k++) piles[l][k] = ranks[l][position[k]];
            memset(taken[l], 0, 13);
        }
        int c[LANES];
        for (int l = 0; l < LANES; l++) c[l] = CENTRE;
        for (int step = 0; step < 53; step++) {
            for (int l = 0; l < LANES; l++) {
                int slot = taken[l][c[l]], live = slot != 4;
                taken[l][c[l]] = (uint8_t)(slot + live);
                int next = piles[l][c[l] * 4 + slot];
                c[l] = live ? next : c[l];
            }
        }
        uint64_t lanes = count - d0 < LANES ? count - d0 : LANES;
        for (uint64_t l = 0; l < lanes; l++) {
            int turned = 0;
            for (int q = 0; q < 13; q++) turned += taken[l][q];
            *wins += turned == 52;
            *cards += (uint64_t)turned;
        }
    }
}

int main(int argc, char **argv) {
    if (argc != 5 || (strcmp(argv[1], "plain") && strcmp(argv[1], "lockstep"))) {
        fprintf(stderr, "usage: clock plain|lockstep SEED FIRST COUNT\n");
        return 2;
    }
    uint64_t seed = strtoull(argv[2], 0, 10), first = strtoull(argv[3], 0, 10);
    uint64_t count = strtoull(argv[4], 0, 10), wins = 0, cards = 0;
    tables();
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (argv[1][0] == 'p')
        plain(seed, first, count, &wins, &cards);
    else
        lockstep(seed, first, count, &wins, &cards);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("%llu %llu %.6f\n", (unsigned long long)wins, (unsigned long long)cards, seconds);
    return 0;
}
