# A stand-in for torch, for the rendezvous store's tests where torch is not installed: only
# torch.distributed.TCPStore, over files, and the shape of c10d's rendezvous state.
