"""torch.distributed.TCPStore as the rendezvous store (api::rendezvousStoreCommand) uses it: get,
compare_set and set_timeout, over one file per key in the directory $GRANARY_FAKE_TCPSTORE, so
that a test reads and writes the rendezvous state from outside. Node and State have the fields of
c10d's rendezvous state the store reads (last_heartbeats, a node's fqdn and pid)."""
import base64
import dataclasses
import datetime
import os
import pickle


@dataclasses.dataclass(frozen=True)
class Node:
    fqdn: str
    pid: int
    local_id: int = 0


@dataclasses.dataclass
class State:
    last_heartbeats: dict


def _path(key):
    return os.path.join(os.environ["GRANARY_FAKE_TCPSTORE"], base64.urlsafe_b64encode(key.encode()).decode())


class TCPStore:
    def __init__(self, host, port, is_master=False, wait_for_workers=True, timeout=None):
        pass

    def set_timeout(self, timeout):
        pass

    def get(self, key):
        try:
            with open(_path(key), "rb") as f:
                return f.read()
        except FileNotFoundError:
            raise RuntimeError("timed out waiting for " + key)

    def set(self, key, value):
        path = _path(key)
        with open(path + ".tmp", "wb") as f:
            f.write(value)
        os.replace(path + ".tmp", path)

    def compare_set(self, key, expected, desired):
        current = self.get(key)
        if current != expected:
            return current
        self.set(key, desired)
        return desired


def write_state(rendezvous_id, hosts):
    """A rendezvous whose agents (one per host) all beat now."""
    now = datetime.datetime.utcnow()
    state = State({Node(host + ".svc.cluster.local", 100 + i): now for i, host in enumerate(hosts)})
    TCPStore("", 0).set("torch.rendezvous." + rendezvous_id, base64.b64encode(pickle.dumps(state)))


def let_go(rendezvous_id):
    """The hosts whose heartbeat the store aged to the epoch, sorted."""
    raw = TCPStore("", 0).get("torch.rendezvous." + rendezvous_id)
    state = pickle.loads(base64.b64decode(raw))
    epoch = datetime.datetime(1970, 1, 1)
    return sorted(n.fqdn.split(".")[0] for n, beat in state.last_heartbeats.items() if beat == epoch)
