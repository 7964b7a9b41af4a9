"""Ordered real text from this machine's Debian documentation: a corpus in the order real corpora come.

Walks ``--root`` (default ``/usr/share/doc``) in sorted path order and writes, file by file and
line by line as the files have them, every line of at least ``--min-tokens`` words, lowercased,
as a LineSentence (words: runs of letters, with inner apostrophes and hyphens). Gzipped files are
read through gzip; markup and code (``.html``, ``.js``...), binary files and files that are not
UTF-8 text are skipped. So a package's
changelog, its copyright and its README follow one another, and packages follow one another by
name: topics come in long runs, as they do in a crawl kept in crawl order or Wikipedia in article
order. Stops at ``--max-words``. Prints the files, lines and words written.

    python benchmarks/debian_corpus.py --out debian-docs.txt --max-words 5e6
"""
import argparse
import gzip
import hashlib
import os
import re
import sys

WORD = re.compile(r"[a-z]+(?:['-][a-z]+)*")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default="/usr/share/doc")
    parser.add_argument("--out", required=True)
    parser.add_argument("--max-words", type=float, default=5e6)
    parser.add_argument("--min-tokens", type=int, default=3)
    return parser.parse_args(argv)


def files(root):
    """Regular files under ``root`` in sorted path order (links followed once, none twice)."""
    seen = set()
    for folder, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(folder, name)
            real = os.path.realpath(path)
            if os.path.isfile(real) and real not in seen:
                seen.add(real)
                yield path


#: markup and code, whose tags and keywords are not prose
SKIPPED = {".html", ".htm", ".xml", ".svg", ".js", ".css", ".json", ".map", ".py", ".c", ".h", ".pl", ".sh",
           ".pdf", ".png", ".jpg", ".gif", ".ico", ".woff", ".ttf", ".inv", ".pickle"}


def text_lines(path):
    """The file's lines as text, or nothing if it is markup, code or not UTF-8 text."""
    name = path[:-3] if path.endswith(".gz") else path
    if os.path.splitext(name)[1].lower() in SKIPPED:
        return []
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as fin:
            data = fin.read(64 << 20)
    except (OSError, EOFError):
        return []
    if b"\0" in data[:4096]:
        return []
    try:
        return data.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return []


def main(argv=None):
    args = parse_args(argv)
    written = lines = used = 0
    seen = set()  # the same text under several packages' names (one package's docs linked from others') once
    with open(args.out, "w", encoding="utf-8") as fout:
        for path in files(args.root):
            text = text_lines(path)
            digest = hashlib.sha1("\n".join(text).encode("utf-8")).digest()
            if digest in seen:
                continue
            seen.add(digest)
            took = False
            for line in text:
                words = WORD.findall(line.lower())
                if len(words) >= args.min_tokens:
                    fout.write(" ".join(words) + "\n")
                    written += len(words)
                    lines += 1
                    took = True
            used += took
            if written >= args.max_words:
                break
    print(f"{args.out}: {used:,} files, {lines:,} lines, {written:,} words from {args.root}, in file order")
    return 0 if written else 1


if __name__ == "__main__":
    sys.exit(main())
