"""The padfold console script: the program installed inside the package, with the same
arguments."""
import os
import pathlib
import sys


def main():
    program = pathlib.Path(__file__).parent / "bin" / "padfold"
    os.execv(str(program), [str(program)] + sys.argv[1:])


if __name__ == "__main__":
    main()
