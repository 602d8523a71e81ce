"""A data-parallel PyTorch job that survives the loss of a worker: run it under torchrun.

granary gives an elastic TrainingJob's workers torchrun's c10d rendezvous (PET_NNODES=min:max,
PET_RDZV_ENDPOINT, ...). When a worker is lost, torchrun stops the workers of the others and
starts them again in a smaller group; when its replacement comes, once more in a larger one. Each
time, this script starts from the newest state any rank holds: every rank saves it after every
step (written aside, then renamed into place) under STATE_DIR, and on start the rank with the
newest sends it to the others, so a new worker on an empty disk joins where the group is, and at
most the step in flight is trained again.

The data: SAMPLES synthetic samples, shuffled each epoch. A step takes the next world x BATCH
positions of the epoch's order and every rank its share (position % world == rank), the way
DistributedSampler shards, so a smaller or larger group goes on where the last one stopped and
each epoch trains every sample once. The loss is the mean over the whole step whatever the world
size, so the curve goes on across a change. At the end rank 0 prints, for each epoch, how many
samples the committed steps trained and how many of them more than once.

Environment: STATE_DIR (default /var/tmp/granary-elastic-state; a granary checkpoint volume, in
local mode, keeps it beyond a gang restart), SAMPLES (4096), BATCH (16 per rank), EPOCHS (2), STEP_SECONDS (0.2, time a step spends
computing, standing in for a real model).

On Debian's python3-torch 1.13 under Python 3.11, torchrun's default --redirects and --tee fail
(an IntFlag change); the example jobs set PET_REDIRECTS and PET_TEE to "1:1", which maps a local
rank that does not exist and so redirects nothing.
"""

import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

STATE_DIR = os.environ.get("STATE_DIR", "/var/tmp/granary-elastic-state")
SAMPLES = int(os.environ.get("SAMPLES", "4096"))
BATCH = int(os.environ.get("BATCH", "16"))
EPOCHS = int(os.environ.get("EPOCHS", "2"))
STEP_SECONDS = float(os.environ.get("STEP_SECONDS", "0.2"))


def sample(index):
    """Sample `index`, the same in every run."""
    g = torch.Generator().manual_seed(index)
    x = torch.randn(32, generator=g)
    return x, (x[:4].sum() > 0).float().reshape(1)


def order(epoch):
    return torch.randperm(SAMPLES, generator=torch.Generator().manual_seed(1000 + epoch)).tolist()


def newest_on_disk():
    """The newest state saved under STATE_DIR by any rank of any run of the group, or None."""
    best = None
    names = os.listdir(STATE_DIR) if os.path.isdir(STATE_DIR) else []
    for name in names:
        if name.startswith("state-") and name.endswith(".pt"):
            state = torch.load(os.path.join(STATE_DIR, name))
            if best is None or state["step"] > best["step"]:
                best = state
    return best


def load(model, optimizer, rank, world):
    """The newest state any rank holds, sent to every rank by the rank that holds it."""
    mine = newest_on_disk()
    steps = [None] * world
    dist.all_gather_object(steps, mine["step"] if mine else -1)
    holder = max(range(world), key=lambda r: steps[r])
    if steps[holder] < 0:
        return {"epoch": 0, "offset": 0, "step": 0, "trained": []}
    box = [mine if rank == holder else None]
    dist.broadcast_object_list(box, src=holder)
    state = box[0]
    model.load_state_dict(state.pop("model"))
    optimizer.load_state_dict(state.pop("optimizer"))
    return state


def save(progress, model, optimizer, rank):
    os.makedirs(STATE_DIR, exist_ok=True)
    path = os.path.join(STATE_DIR, f"state-{rank}.pt")
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        torch.save(dict(progress, model=model.state_dict(), optimizer=optimizer.state_dict()), f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def report(trained):
    for epoch in range(EPOCHS):
        seen = {}
        for e, start, end in trained:
            if e == epoch:
                for position in range(start, end):
                    seen[position] = seen.get(position, 0) + 1
        again = sum(1 for n in seen.values() if n > 1)
        print(f"epoch {epoch}: {len(seen)} of {SAMPLES} samples trained, {again} more than once",
              flush=True)


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    progress = load(model, optimizer, rank, world)
    ddp = DistributedDataParallel(model)
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    print(f"rank {rank} of {world} starts at epoch {progress['epoch']} position "
          f"{progress['offset']} (restart {restart})", flush=True)
    while progress["epoch"] < EPOCHS:
        epoch, start = progress["epoch"], progress["offset"]
        end = min(SAMPLES, start + world * BATCH)
        positions = list(range(start + rank, end, world))
        epoch_order = order(epoch)
        pairs = [sample(epoch_order[p]) for p in positions] or [sample(0)]
        x = torch.stack([p[0] for p in pairs])
        y = torch.stack([p[1] for p in pairs])
        losses = torch.nn.functional.binary_cross_entropy_with_logits(ddp(x), y, reduction="none")
        weight = world / (end - start) if positions else 0.0  # DDP averages over the world
        optimizer.zero_grad()
        (losses.sum() * weight).backward()
        optimizer.step()
        total = torch.tensor([losses.sum().item() if positions else 0.0])
        dist.all_reduce(total)
        time.sleep(STEP_SECONDS)
        progress["trained"].append((epoch, start, end))
        progress["step"] += 1
        progress["offset"] = end
        if end == SAMPLES:
            progress["epoch"], progress["offset"] = epoch + 1, 0
        save(progress, model, optimizer, rank)
        if rank == 0:
            print(f"step {progress['step']} epoch {epoch} positions {start}-{end} world {world} "
                  f"loss {total.item() / (end - start):.6f} at {time.time():.3f}", flush=True)
        dist.barrier()  # no rank starts the next step before every rank saved this one
    if rank == 0:
        report(progress["trained"])
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
