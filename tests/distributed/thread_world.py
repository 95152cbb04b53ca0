"""A stand-in for MPI's COMM_WORLD whose ranks are threads of one process (tests drive the rank code paths in
process with it, inside coverage; the real runs go through tttv2-run)."""

from __future__ import annotations

import threading
from collections import defaultdict, deque

import numpy as np


class PerThread:
    """A dict per thread, for module state that belongs to a process (one rank), e.g. the sockets' counters."""

    def __init__(self):
        self.local = threading.local()

    def setdefault(self, key, value):
        return self.local.__dict__.setdefault("items", {}).setdefault(key, value)


class ThreadWorld:
    """COMM_WORLD of two ranks played by two threads of this process: a message sent by one thread to the other's
    rank waits in a queue until that thread probes for it."""

    BYTE = "byte"

    def __init__(self):
        self.COMM_WORLD = self
        self.me = threading.local()
        self.queues = defaultdict(deque)
        self.gathered = defaultdict(dict)
        self.lock = threading.Lock()

    def Get_rank(self):
        return self.me.rank

    def Get_size(self):
        return 2

    class _Done:
        def Test(self):
            return True

    class Status:
        def Get_count(self, _kind):
            return self.count

    def Isend(self, buf, dest, tag):
        with self.lock:
            self.queues[(self.me.rank, dest, tag)].append(np.array(buf[0], copy=True))
        return self._Done()

    def Iprobe(self, source, tag):
        return bool(self.queues[(source, self.me.rank, tag)])

    def Improbe(self, source, tag, status):
        with self.lock:
            queue = self.queues[(source, self.me.rank, tag)]
            if not queue:
                return None
            data = queue.popleft()
        status.count = data.size
        world = self

        class Message:
            def Irecv(self, buf):
                buf[0][...] = data
                return world._Done()

        return Message()

    def Iallgather(self, send, recv):
        """Each rank's buffer, in rank order, once every rank has given its own (the n-th call of each thread
        meets the n-th call of the others)."""
        number = getattr(self.me, "gathers", 0)
        self.me.gathers = number + 1
        with self.lock:
            self.gathered[number][self.me.rank] = np.array(send[0], copy=True)
        world = self

        class Request:
            def Test(self):
                with world.lock:
                    parts = dict(world.gathered[number])
                if len(parts) < world.Get_size():
                    return False
                for rank in range(world.Get_size()):
                    recv[0][rank][...] = parts[rank]
                return True

        return Request()
