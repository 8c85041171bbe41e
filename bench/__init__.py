"""The benchmark suite: `make bench` (= `python -m bench`). See bench/README.md."""
