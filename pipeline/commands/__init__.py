"""What the command line's commands read from their user and check before anything runs:
seeds, deal ranges, cells, strategies (`inputs`), and layouts a user brings (`layouts`)."""
