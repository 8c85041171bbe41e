"""Profile a CSV file: python3 profile.py data.csv [delimiter]. Standard library only."""

import csv
import statistics
import sys
from collections import Counter


def number(text):
    try:
        return float(text.replace(",", "")) if text.strip() else None
    except ValueError:
        return None


def main(path, delimiter=None):
    with open(path, newline="", encoding="utf-8", errors="replace") as handle:
        sample = handle.read(65536)
        handle.seek(0)
        dialect = csv.Sniffer().sniff(sample, delimiters=delimiter or ",;\t|")
        rows = list(csv.reader(handle, dialect))
    header, body = rows[0], rows[1:]
    print(f"rows: {len(body)}  columns: {len(header)}  delimiter: {dialect.delimiter!r}")
    print(f"duplicate rows: {len(body) - len({tuple(r) for r in body})}")
    for index, name in enumerate(header):
        values = [r[index] if index < len(r) else "" for r in body]
        present = [v for v in values if v.strip()]
        numbers = [n for n in map(number, present) if n is not None]
        missing = len(values) - len(present)
        if present and len(numbers) == len(present):
            print(
                f"- {name}: number, missing {missing}, min {min(numbers):g}, max {max(numbers):g}, "
                f"mean {statistics.fmean(numbers):.4g}, median {statistics.median(numbers):g}"
            )
        else:
            counts = Counter(present)
            top = ", ".join(f"{v} ({c})" for v, c in counts.most_common(5))
            print(f"- {name}: text, missing {missing}, distinct {len(counts)}, top: {top}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
