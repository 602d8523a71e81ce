"""A data-parallel PyTorch job that saves and resumes through a granary checkpoint volume.

Each save is a directory `step-N/` in the layout of PyTorch Distributed Checkpoint: every rank
writes its own `__<rank>_0.distcp` and fsyncs it, then rank 0 writes `.metadata.tmp` and renames it
to `.metadata`, the file that marks the checkpoint complete. Rank 0 then points the tracker file
`latest` at it (written aside and renamed over, as safetensors and Megatron do) and removes all but
the newest KEEP checkpoints with shutil.rmtree, as HuggingFace's save_total_limit does. granary
uploads `.metadata` and `latest` only after the files they name, and the removals after them.

On start every rank loads the newest complete checkpoint under CHECKPOINTS (the volume's
mountPath), restoring the model, the optimizer and the step, so that a gang restarted after a
failure goes on with the same losses an uninterrupted run has.

torch.distributed.checkpoint (torch >= 2.0) writes the same sequence of files; this script writes
it with torch.save so that it runs on Debian's python3-torch 1.13 as well.

examples/checkpoints/job.yaml is a TrainingJob that runs it, on a cluster (kubectl apply) and on
one machine alike (`granaryctl run -f examples/checkpoints/job.yaml` from the repository's root).

tests/cli/checkpoint_run_test.sh runs it through granaryctl run, with a worker failing mid-run.

Environment: CHECKPOINTS (default /ckpt), STEPS (40), SAVE_EVERY (10), KEEP (2), and for a test
of recovery FAIL_AT_STEP with FAIL_ONCE_FILE: the last rank kills itself (SIGKILL) at that step if
FAIL_ONCE_FILE does not exist yet (creating it, so that the restarted gang runs through).
"""

import os
import shutil
import signal

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

CHECKPOINTS = os.environ.get("CHECKPOINTS", "/ckpt")
STEPS = int(os.environ.get("STEPS", "40"))
SAVE_EVERY = int(os.environ.get("SAVE_EVERY", "10"))
KEEP = int(os.environ.get("KEEP", "2"))


def batch(step, rank):
    """The batch of one rank at one step, the same in every run."""
    g = torch.Generator().manual_seed(step * 1000 + rank)
    x = torch.randn(64, 32, generator=g)
    y = (x[:, :4].sum(dim=1, keepdim=True) > 0).float()
    return x, y


def write_durably(path, obj):
    with open(path, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())


def complete_steps():
    names = os.listdir(CHECKPOINTS) if os.path.isdir(CHECKPOINTS) else []
    return sorted(int(n[5:]) for n in names
                  if n.startswith("step-") and os.path.exists(os.path.join(CHECKPOINTS, n, ".metadata")))


def save(step, model, optimizer, rank, world):
    directory = os.path.join(CHECKPOINTS, f"step-{step}")
    os.makedirs(directory, exist_ok=True)  # every rank, at once
    state = {"model": model.module.state_dict(), "optimizer": optimizer.state_dict(), "step": step}
    write_durably(os.path.join(directory, f"__{rank}_0.distcp"), state)
    dist.barrier()
    if rank == 0:
        metadata = os.path.join(directory, ".metadata")
        write_durably(metadata + ".tmp", {"step": step, "files": [f"__{r}_0.distcp" for r in range(world)]})
        os.rename(metadata + ".tmp", metadata)
        with open(os.path.join(CHECKPOINTS, "latest.tmp"), "w") as f:
            f.write(f"step-{step}\n")
            f.flush()
            os.fsync(f.fileno())
        os.rename(os.path.join(CHECKPOINTS, "latest.tmp"), os.path.join(CHECKPOINTS, "latest"))
        for old in complete_steps()[:-KEEP]:
            shutil.rmtree(os.path.join(CHECKPOINTS, f"step-{old}"))
    dist.barrier()


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    start = 0
    steps = complete_steps()
    if steps:
        state = torch.load(os.path.join(CHECKPOINTS, f"step-{steps[-1]}", f"__{rank}_0.distcp"))
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["step"]
        print(f"rank {rank} resumed from step-{start}", flush=True)

    fail_at = int(os.environ.get("FAIL_AT_STEP", "-1"))
    fail_once = os.environ.get("FAIL_ONCE_FILE", "")
    for step in range(start + 1, STEPS + 1):
        if step == fail_at and rank == world - 1 and fail_once and not os.path.exists(fail_once):
            open(fail_once, "w").close()
            print(f"rank {rank} fails at step {step}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)  # as a lost node would
        x, y = batch(step, rank)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total = loss.detach().clone()
        dist.all_reduce(total)
        if rank == 0:
            print(f"step {step} loss {total.item() / world:.6f}", flush=True)
        if step % SAVE_EVERY == 0:
            save(step, model, optimizer, rank, world)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
