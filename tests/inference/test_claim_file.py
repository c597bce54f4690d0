"""A claims file read and checked (pipeline/inference/claim_file.py): the shipped rule pages'
file and the example file read into the vocabulary; every mistake refused in one line that
names the claim, what was wrong and what is allowed. No sweep, no files but the shipped ones
and those written here."""

from __future__ import annotations

import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from pipeline import RULE_PAGES
from pipeline.engine.rules import Cell
from pipeline.inference import claim_file
from pipeline.inference import claims as vocabulary
from pipeline.inference.claim_file import ClaimFileError, parse

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "claims-from-the-web.toml"

GOOD = """
[[claim]]
id = "watch_roughly_25_to_30"
says = "With the Watch, win rates climb to roughly 25-30%"
source = { title = "a Clock solitaire strategy page" }
measure = "win_rate"
cells = { variant = "watch", strategy = "random" }
asserts = { between = [0.25, 0.30] }
"""


def test_a_claim_as_the_issue_writes_it():
    (claim,) = parse(GOOD, "mine.toml")
    assert claim.id == "watch_roughly_25_to_30" and claim.says.startswith("With the Watch")
    assert claim.sources == (vocabulary.Source("a Clock solitaire strategy page"),)
    assert claim.measure == vocabulary.WinRate((vocabulary.Pattern("watch", "random"),))
    assert claim.asserts.low.number == 0.25 and claim.asserts.high.number == 0.30
    # The pattern finds the sweep's cell by the rules' preference: face down, round-robin.
    cells = [Cell("watch", "random", "up", "packets"), Cell("watch", "random")]
    assert claim.measure.candidates(cells) == [Cell("watch", "random")]


def test_the_rule_pages_file_is_shipped_and_reads_as_eleven_claims():
    claims = claim_file.read(RULE_PAGES)
    assert [claim.id for claim in claims] == [
        "one_in_13",
        "better_than_one_in_three",
        "pick_makes_no_difference",
        "near_misses_come_home",
        "unvisited_by_third_king",
        "no_win_without_king_bottom",
        "thirteen_losses_ordinary",
        "foresight_no_agency",
        "deal_order_no_change",
        "won_deal_52_flips",
        "play_out_deaths",
    ]
    first = claims[0]
    assert (
        first.asserts.value.number == float(Fraction(1, 13)) and first.asserts.value.text == "1/13"
    )
    assert len(first.sources) == 4 and all(".txt" not in s.title for c in claims for s in c.sources)
    assert Path(claim_file.rule_pages_path()).is_file()


def test_the_example_file_reads():
    claims = claim_file.read(str(EXAMPLE))
    ids = [claim.id for claim in claims]
    assert {"watch_roughly_25_to_30", "solitairewinrates_7_69", "wikipedia_1_in_13"} <= set(ids)
    assert all(claim.sources for claim in claims)


def test_files_read_together_keep_every_id_once(tmp_path):
    mine = tmp_path / "mine.toml"
    mine.write_text(GOOD)
    both = claim_file.read_all([RULE_PAGES, str(mine)])
    assert len(both) == 12 and both[-1].id == "watch_roughly_25_to_30"
    with pytest.raises(ClaimFileError, match="id already used by an earlier claims file"):
        claim_file.read_all([str(mine), str(mine)])


def claim(**changes) -> str:
    """GOOD with keys replaced (a value of None removes the key) or added, as TOML text."""
    lines = {line.split(" = ", 1)[0]: line for line in GOOD.strip().splitlines()[1:]}
    for key, value in changes.items():
        if value is None:
            lines.pop(key, None)
        else:
            lines[key] = f"{key} = {value}"
    return "[[claim]]\n" + "\n".join(lines.values()) + "\n"


@pytest.mark.parametrize(
    "changes, words",
    [
        ({"measure": '"win_rat"'}, ["measure: 'win_rat' is not known", "allowed: win_rate,"]),
        ({"colour": '"red"'}, ["colour: unknown key for measure win_rate", "allowed: id, says"]),
        ({"says": None}, ["says: missing"]),
        ({"id": '"two words"'}, ["id: 'two words' is not allowed"]),
        ({"asserts": "{ betwen = [0.25, 0.3] }"}, ["asserts.betwen: unknown", "between"]),
        ({"asserts": "{ between = [0.3, 0.25] }"}, ["low is not below high"]),
        ({"asserts": "{ between = [0.25, 1.3] }"}, ["1.3 is out of range", "from 0 to 1"]),
        (
            {"asserts": "{ equals = 0.3, tolerance = 0.9 }"},
            ["asserts.tolerance: 0.9 is out of range"],
        ),
        ({"asserts": "{ equals = 0.3, tolerance = 0 }"}, ["asserts.tolerance: 0 is out of range"]),
        ({"asserts": '{ equals = "1/0" }'}, ["asserts.equals: '1/0' is out of range"]),
        ({"asserts": "{ above = 0.3, below = 0.4 }"}, ["expected a table with one of"]),
        ({"asserts": "{ above = 0.3, side = 'above' }"}, ["asserts.side: unknown key for above"]),
        ({"asserts": "{ never = true }"}, ["asserts.never: say when none is enough"]),
        (
            {"asserts": "{ no_difference = true }"},
            ["asserts.no_difference: not for measure win_rate"],
        ),
        (
            {"cells": '{ variant = "watch", strategy = "randm" }'},
            ["cells.strategy: 'randm' is not known"],
        ),
        ({"cells": '{ variant = "watch" }'}, ["variant 'watch' needs a strategy"]),
        ({"cells": '{ strategy = "most" }'}, ["cells.variant: missing"]),
        ({"cells": '{ variant = "standard", strategy = "most" }'}, ["strategy applies to watch"]),
        (
            {"cells": '{ variant = "watch", strategy = "most", colour = "red" }'},
            ["cells.colour: unknown axis"],
        ),
        (
            {"cells": '{ variant = "watch", strategy = "informed", finale = "down" }'},
            ["is no cell of the rules", "needs finale = 'up'"],
        ),
        ({"source": '{ name = "x" }'}, ["source.name: unknown key"]),
        (
            {"source": '{ title = "x", url = "ftp://x" }'},
            ["source.url: 'ftp://x' is not a web address"],
        ),
        ({"pick": '"middle"'}, ["pick: 'middle' is not known", "first, best, worst"]),
    ],
)
def test_a_mistake_is_one_line_naming_it(changes, words):
    with pytest.raises(ClaimFileError) as caught:
        parse(claim(**changes), "mine.toml")
    message = str(caught.value)
    assert "\n" not in message and message.startswith("mine.toml: claim"), message
    for word in words:
        assert word in message, (word, message)


@pytest.mark.parametrize(
    "body, words",
    [
        (
            'measure = "difference"\na = { order = "round-robin", strategy = "most" }\n'
            'b = { order = "packets" }',
            ["not played on the same deals", "differ in the order alone"],
        ),
        ('measure = "difference"\na = { strategy = "most" }', ["b: missing"]),
        (
            'measure = "difference"\na = { strategy = "most" }\nb = { strategy = "most" }',
            ["name the same cells"],
        ),
        ('measure = "spread"', ["spread compares cells; expected at least two"]),
        (
            'measure = "win_rate_where"\nfact = "hint"\nrange = [0, 1]',
            ["fact: 'hint' is not a fact"],
        ),
        ('measure = "win_rate_where"\nfact = "down_at_stop"\nrange = [3, 1]', ["range: [3, 1]"]),
        ('measure = "win_rate_where"\nfact = "down_at_stop"\nrange = [0, 49]', ["<= 48"]),
        (
            'measure = "win_rate_where"\nfact = "kings_at_bottom"\nrange = [0, 0]',
            ["for standard play only"],
        ),
        ('measure = "losing_runs"\nn = 10', ["n: 10 is not kept by the records; expected 13"]),
        ('measure = "wins_turning"\ncards = 60', ["cards: 60 is not allowed", "from 1 to 53"]),
        ('measure = "deaths_as_predicted"', ["reads play_out cells only"]),
    ],
)
def test_a_measure_given_cells_it_cannot_read_is_refused(body, words):
    text = GOOD.replace('measure = "win_rate"', body)
    with pytest.raises(ClaimFileError) as caught:
        parse(text, "mine.toml")
    for word in words:
        assert word in str(caught.value), (word, str(caught.value))


@pytest.mark.parametrize(
    "text, words",
    [
        ("", ["no claim; expected one or more [[claim]] tables"]),
        (
            "title = 'x'\n" + GOOD,
            ["'title': unknown key; a claims file holds [[claim]] tables only"],
        ),
        ("[[claim]\n", ["not valid TOML"]),
        (GOOD + GOOD, ["claim 'watch_roughly_25_to_30': duplicated id"]),
    ],
)
def test_a_file_that_is_no_claims_file_is_refused(text, words):
    with pytest.raises(ClaimFileError) as caught:
        parse(text, "mine.toml")
    for word in words:
        assert word in str(caught.value), (word, str(caught.value))


def test_a_file_that_cannot_be_read(tmp_path):
    with pytest.raises(ClaimFileError, match="nowhere.toml: cannot read"):
        claim_file.read(str(tmp_path / "nowhere.toml"))
    (tmp_path / "latin.toml").write_bytes(b"says = '\xe9'")
    with pytest.raises(ClaimFileError, match="not UTF-8"):
        claim_file.read(str(tmp_path / "latin.toml"))


def test_the_vocabulary_is_what_the_file_reads():
    """Every measure and assertion the module defines has its keys in the file's grammar."""
    assert set(claim_file.MEASURE_KEYS) == set(vocabulary.MEASURES)
    assert set(claim_file.ASSERTION_KEYS) == set(vocabulary.ASSERTIONS)


def claims_text(count: int, start: int = 0) -> str:
    """``count`` copies of GOOD, each of its own id."""
    return "".join(
        GOOD.replace('"watch_roughly_25_to_30"', f'"claim_{n}"')
        for n in range(start, start + count)
    )


def test_a_file_or_files_past_the_bounds_are_refused_in_one_line(tmp_path):
    """Issue 45: a 10 MB file of 62,856 valid claims kept a report running past 150 s. A file
    holds at most MAX_FILE_BYTES and MAX_CLAIMS, and the files read together MAX_CLAIMS."""
    at_most = tmp_path / "at_most.toml"
    at_most.write_text(claims_text(claim_file.MAX_CLAIMS))
    assert len(claim_file.read(str(at_most))) == claim_file.MAX_CLAIMS
    one_more = tmp_path / "one_more.toml"
    one_more.write_text(claims_text(claim_file.MAX_CLAIMS + 1))
    assert one_more.stat().st_size < claim_file.MAX_FILE_BYTES  # the count, not the size
    with pytest.raises(ClaimFileError) as caught:
        claim_file.read(str(one_more))
    assert str(caught.value) == (f"{one_more}: 1,001 claims; a claims file holds at most 1,000")
    big = tmp_path / "big.toml"
    big.write_text(GOOD + "#" * claim_file.MAX_FILE_BYTES + "\n")
    with pytest.raises(ClaimFileError, match=r"over 1 MiB; a claims file holds at most 1,048,576"):
        claim_file.read(str(big))
    halves = [tmp_path / "first.toml", tmp_path / "second.toml"]
    halves[0].write_text(claims_text(600))
    halves[1].write_text(claims_text(600, start=600))
    with pytest.raises(ClaimFileError, match=r"second.toml: claims past the 1,000th"):
        claim_file.read_all([str(path) for path in halves])


def test_an_endless_claims_file_is_refused_not_read_to_its_end():
    """Read in a process of its own, under a bound: a read to the end never ends."""
    code = (
        "from pipeline.inference import claim_file\n"
        "try:\n    claim_file.read('/dev/zero')\n"
        "except claim_file.ClaimFileError as error:\n    print(error)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.startswith("/dev/zero: over 1 MiB"), (done.stdout, done.stderr)
