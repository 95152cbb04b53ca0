"""The demo's prefetcher bookkeeping, in its style (``prefetcher_common.py``'s setup object): each module of a
decode model hands it the weights the DRAM prefetcher streams, in the order the matmuls read them, and it keeps
each weight's device address for the prefetch op's address tensor. Only a device tensor has an address."""


class PrefetcherSetup:
    def __init__(self, mesh_device, n_tensors):
        self.mesh_device = mesh_device
        self.n_tensors = n_tensors
        self.tensors = []
        self.tensor_addrs = []

    def insert_tensor(self, tensor):
        self.tensors.append(tensor)
        self.tensor_addrs.append(tensor.buffer_address())

    def get_tensor_addrs(self):
        assert len(self.tensor_addrs) == self.n_tensors, (
            f"expected {self.n_tensors} tensor addresses, got {len(self.tensor_addrs)}"
        )
        return list(self.tensor_addrs)
