"""serving/mailbox.py: asyncio.Queue's behaviour for what the channel layers use, in a
fraction of its memory."""

import asyncio
import tracemalloc

import pytest

from chat.realtime import layers
from serving.mailbox import Mailbox


async def test_items_come_out_in_order_and_a_full_box_refuses():
    box = Mailbox(maxsize=2)
    box.put_nowait("a")
    box.put_nowait("b")
    assert box.full() and box.qsize() == 2 and box.first() == "a"
    with pytest.raises(asyncio.QueueFull):
        box.put_nowait("c")
    assert [await box.get(), box.get_nowait()] == ["a", "b"]
    assert box.empty()
    with pytest.raises(asyncio.QueueEmpty):
        box.get_nowait()
    unbounded = Mailbox()
    for i in range(500):
        unbounded.put_nowait(i)
    assert not unbounded.full()


async def test_a_waiting_reader_is_woken_by_a_put():
    box = Mailbox()
    reader = asyncio.create_task(box.get())
    await asyncio.sleep(0)
    assert not reader.done()
    box.put_nowait("doorbell")
    assert await asyncio.wait_for(reader, 1) == "doorbell"


async def test_each_put_wakes_one_reader_in_turn():
    box = Mailbox()
    readers = [asyncio.create_task(box.get()) for _ in range(3)]
    await asyncio.sleep(0)
    box.put_nowait(1)
    box.put_nowait(2)
    await asyncio.sleep(0)
    assert [r.result() for r in readers[:2]] == [1, 2] and not readers[2].done()
    readers[2].cancel()


async def test_a_cancelled_reader_leaves_nothing_behind():
    box = Mailbox()
    reader = asyncio.create_task(box.get())
    await asyncio.sleep(0)
    reader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reader
    assert box._getters == []
    box.put_nowait("x")
    assert await box.get() == "x"


async def test_a_reader_woken_then_cancelled_passes_the_item_on():
    box = Mailbox()
    first, second = asyncio.create_task(box.get()), asyncio.create_task(box.get())
    await asyncio.sleep(0)
    box.put_nowait("only")  # wakes the first reader...
    first.cancel()  # ...which is cancelled before it runs
    assert await asyncio.wait_for(second, 1) == "only"
    assert first.cancelled()


async def test_an_idle_reader_costs_a_fraction_of_an_asyncio_queue():
    async def held(make) -> int:
        tracemalloc.start()
        try:
            queues = [make() for _ in range(1000)]
            readers = [asyncio.create_task(q.get()) for q in queues]
            await asyncio.sleep(0)
            size = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        for r in readers:
            r.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
        return size

    queue_bytes, mailbox_bytes = await held(asyncio.Queue), await held(Mailbox)
    # The reader's task is in both; the queue's four deques (~3 KiB) are what goes.
    assert queue_bytes - mailbox_bytes > 2_500 * 1000


async def test_the_layer_drops_an_empty_channel_when_its_reader_goes():
    layer = layers.InMemoryChannelLayer()
    name = await layer.new_channel()
    reader = asyncio.create_task(layer.receive(name))
    await asyncio.sleep(0)
    assert isinstance(layer.channels[name], Mailbox)
    reader.cancel()
    await asyncio.gather(reader, return_exceptions=True)
    assert name not in layer.channels


async def test_old_group_memberships_end(monkeypatch):
    layer = layers.InMemoryChannelLayer(group_expiry=10)
    old, new = await layer.new_channel(), await layer.new_channel()
    await layer.group_add("g", old)
    await layer.group_add("g", new)
    layer.groups["g"][old] -= 60  # joined a minute ago
    monkeypatch.setattr(layers, "CLEAN_INTERVAL", 0.0)
    await layer.group_send("g", {"type": "x"})
    assert list(layer.groups["g"]) == [new]
