"""The peers of `python -m bench --only peers` (bench/peers/measure.py): Chainlit, with and without
its data layer, beside the project and the minimal Channels relay (bench/reference_relay.py)."""
