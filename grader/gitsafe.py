"""Every git command the grader runs, and why none of them obeys a learner.

A learner's repository is data, never a program.  Git, run *in* a repository, obeys that
repository's own configuration -- clean and smudge filters named by ``.gitattributes``,
``core.fsmonitor``, hooks, ``core.pager``, aliases, ``include.path``, ``core.sshCommand``
-- and runs the commands it names.  No flag switches repository-local configuration off
(``GIT_CONFIG_NOSYSTEM`` and ``GIT_CONFIG_GLOBAL`` cover only the other two levels), and
porcelain such as ``git status`` re-reads the work tree through those filters.  So, on the
trusted side (``grade ci``, ``grade batch``, ``grade compare``, often as root):

* **Git never runs in a learner's repository or work tree.**  A repository on this machine
  (a checkout's ``.git`` folder, a bare repository, a ``file://`` URL) is *imported*
  (``import_local``): its object files are copied, following no link, into a new bare
  repository the grader made -- loose objects only when their contents hash to their
  names, packs re-indexed by ``git index-pack``, which checks every object -- and its HEAD
  is resolved by reading the ref files as data.  Its config, hooks, ``info/``, index,
  alternates and work tree are never read.  A ``.git`` that is a link or a pointer file
  (``gitdir: ...``) is not followed: the folder is then graded as files on disk.
* **A remote repository** (a URL) is cloned into a grader-owned bare repository
  (``fetch_remote``): shallow, blobs over ``MAX_FILE_BYTES`` left on the server, every
  object checked on arrival (``transfer.fsckObjects``), hook templates off, protocols
  limited to https/http/ssh/git, and at most ``MAX_REPOSITORY_BYTES`` on disk: a watchdog
  measures the clone while it runs and stops it past that.  The instructor's own global
  configuration still applies here (credentials for private forks): it is not learner data.
* **A grader-owned repository** (``Store``) is the only place git runs on learner objects:
  ``GIT_DIR`` fixed, no system or global configuration, hooks, fsmonitor and pager off,
  replace refs and lazy fetches off.  Blobs are read raw with ``cat-file --batch`` (no
  filter, textconv or attribute ever applies: ``.gitattributes`` is a file like any other)
  and trees are parsed by the grader itself (``parse_tree``), so every name is seen exactly
  as committed (``grader.submission.read_commit`` judges them).
* The course's own repository is the instructor's: ``in_course_repository`` runs plain git
  there (``grade release``, ``grade reset``).

Budgets (per repository): ``MAX_REPOSITORY_BYTES`` on disk for an import or a clone,
``MAX_LOOSE_OBJECTS`` loose objects, ``MAX_OBJECT_BYTES`` per loose object.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import signal
import stat
import subprocess
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

from grader.safepath import problem_in_name, shown, write_beneath
from grader.sandbox.disk import usage
from grader.submission import MAX_FILE_BYTES  # blobs larger than this stay on the server: never read

GIT_TIMEOUT_S = 600  # a clone or fetch over the network
LOCAL_TIMEOUT_S = 120  # a command on a grader-owned repository
MAX_REPOSITORY_BYTES = 128 << 20  # what one learner repository may occupy here, imported or cloned
MAX_LOOSE_OBJECTS = 100_000
MAX_OBJECT_BYTES = 64 << 20  # one loose object, inflated
WATCH_INTERVAL_S = 0.1  # how often a clone's size is measured while it runs
REMOTE_PROTOCOLS = ("https", "http", "ssh", "git")

_HEX = re.compile(rb"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
_BAD_REF_CHARS = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


class GitError(RuntimeError):
    """A repository could not be read, imported or fetched; the message says why."""


# --- running git ------------------------------------------------------------------------------

def _fixed_env(git_dir: Path | None) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": "/nonexistent",
        "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_NO_LAZY_FETCH": "1",
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_PROTOCOL_FROM_USER": "0",
    }
    if git_dir is not None:
        env["GIT_DIR"] = str(git_dir)
    return env


#: Set on every command: nothing configured anywhere runs a program or follows the learner.
_FIXED_CONFIG = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "core.pager=cat",
                 "-c", "core.untrackedCache=false", "-c", "safe.directory=*", "-c", "protocol.allow=never")


def _run(cmd: list[str], env: dict[str, str], *, cwd: str = "/", input: bytes | None = None, stdin=None,
         timeout: float = LOCAL_TIMEOUT_S) -> bytes:
    try:
        proc = subprocess.run(cmd, input=input, stdin=stdin if input is None else None, capture_output=True,
                              timeout=timeout, env=env, cwd=cwd)
    except FileNotFoundError:
        raise GitError("git is not installed; install it to grade git repositories") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git {_verb(cmd)} took over {timeout:g} s") from None
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.decode("utf-8", "replace").strip().splitlines() if ln.strip()]
        raise GitError(f"git {_verb(cmd)} failed: {shown(lines[-1]) if lines else f'exit status {proc.returncode}'}")
    return proc.stdout


def _verb(cmd: list[str]) -> str:
    """The git command of ``cmd`` (``fetch`` in ``git -c k=v --git-dir D fetch ...``)."""
    args = cmd[1:]
    while args and args[0] in ("-c", "--git-dir"):
        args = args[2:]
    return args[0] if args else "git"


class Store:
    """A bare repository the grader made (``create``, ``import_local``, ``fetch_remote``);
    learner objects are read only from one of these.  ``shown_as`` is what people are
    told the objects came from (the learner's folder or URL)."""

    def __init__(self, path: Path, shown_as: str = ""):
        self.path = Path(path)
        self.shown_as = shown_as or str(path)
        self._readers: dict[str, subprocess.Popen] = {}
        self._lock = threading.Lock()
        self._trees: dict[str, bytes] = {}

    @classmethod
    def create(cls, path: Path, *, sha256: bool = False, shown_as: str = "") -> "Store":
        fmt = ["--object-format=sha256"] if sha256 else []
        _run(["git", *_FIXED_CONFIG, "init", "--quiet", "--bare", "--template=", *fmt, str(path)], _fixed_env(None))
        return cls(path, shown_as)

    def run(self, *args: str, input: bytes | None = None, stdin=None) -> bytes:
        """``git <args>`` on this repository, with the configuration fixed by the grader."""
        return _run(["git", *_FIXED_CONFIG, *args], _fixed_env(self.path), cwd=str(self.path), input=input,
                    stdin=stdin)

    # -- objects, read raw -----------------------------------------------------------------
    def read(self, sha: str, limit: int) -> tuple[str, int, bytes | None] | None:
        """(type, size, contents) of the object ``sha`` -- contents None when it is over
        ``limit`` bytes, which are then never read -- or None when the repository does not
        hold it.  Two long-lived ``cat-file`` processes answer: one for sizes, one for contents."""
        if not _HEX.match(sha.encode("ascii", "replace")):
            raise GitError(f"not an object name: {shown(sha)!r}")
        with self._lock:
            header = self._ask("--batch-check", sha)
            if header is None:
                return None
            kind, size = header
            if size > limit:
                return kind, size, None
            if self._ask("--batch", sha) is None:
                return None
            proc = self._readers["--batch"]
            data = proc.stdout.read(size + 1)[:size]
            if len(data) != size:
                self.close()
                raise GitError("git cat-file stopped in the middle of an object")
            return kind, size, data

    def _ask(self, mode: str, sha: str) -> tuple[str, int] | None:
        proc = self._cat_file(mode)
        try:
            proc.stdin.write(sha.encode("ascii") + b"\n")
            proc.stdin.flush()
        except OSError:
            header = b""
        else:
            header = proc.stdout.readline(512)
        parts = header.split()
        if len(parts) == 3 and parts[2].isdigit():
            return parts[1].decode("ascii", "replace"), int(parts[2])
        if header.endswith((b" missing\n", b" ambiguous\n")):
            return None
        self.close()
        raise GitError(f"git cat-file answered {header[:80]!r}")

    def tree(self, sha: str, limit: int) -> bytes | None:
        """The raw tree object ``sha`` (cached: the same folders are read for each exercise)."""
        if sha not in self._trees:
            got = self.read(sha, limit)
            if got is None or got[0] != "tree" or got[2] is None:
                return None
            self._trees[sha] = got[2]
        return self._trees[sha]

    def _cat_file(self, mode: str) -> subprocess.Popen:
        reader = self._readers.get(mode)
        if reader is None or reader.poll() is not None:
            try:
                reader = self._readers[mode] = subprocess.Popen(
                    ["git", *_FIXED_CONFIG, "cat-file", mode], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL, env=_fixed_env(self.path), cwd=str(self.path))
            except FileNotFoundError:
                raise GitError("git is not installed; install it to grade git repositories") from None
        return reader

    def close(self) -> None:
        readers, self._readers = self._readers, {}
        for reader in readers.values():
            for stream in (reader.stdin, reader.stdout):
                with contextlib.suppress(OSError):
                    stream.close()
            with contextlib.suppress(OSError):
                reader.kill()
            reader.wait()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):  # a reader left open must not outlive its store
        with contextlib.suppress(Exception):
            self.close()


def parse_tree(data: bytes, hash_len: int) -> list[tuple[str, str, str]]:
    """The entries of a raw tree object as (mode, name, sha hex), in stored order and
    exactly as stored (duplicates, ``..`` and ``/`` included: the caller judges names).
    Names that are not UTF-8 keep their bytes as lone surrogates."""
    entries, i, n = [], 0, len(data)
    while i < n:
        space = data.find(b" ", i)
        nul = data.find(b"\0", space + 1) if space >= 0 else -1
        if space < 0 or nul < 0 or nul + 1 + hash_len > n:
            raise GitError("a tree object is malformed")
        mode = data[i:space].decode("ascii", "replace")
        name = data[space + 1:nul].decode("utf-8", "surrogateescape")
        entries.append((mode, name, data[nul + 1:nul + 1 + hash_len].hex()))
        i = nul + 1 + hash_len
    return entries


# --- a learner's repository on this machine ---------------------------------------------------

def find_repository(folder: Path) -> tuple[Path | None, str]:
    """(the git folder of ``folder``, "") when it is a checkout with a real ``.git`` folder
    or a bare repository; (None, why) when it has a ``.git`` that cannot be read as one (a
    link, a ``gitdir:`` pointer file); (None, "") when it is no repository at all."""
    folder = Path(folder)
    try:
        st = os.lstat(folder / ".git")
    except OSError:
        st = None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            return folder / ".git", ""
        what = "a link" if stat.S_ISLNK(st.st_mode) else "a file pointing elsewhere (a worktree or submodule)"
        return None, f"its .git is {what}, which the grader does not follow"
    if all(_is_plain(folder / name, want) for name, want in (("HEAD", stat.S_ISREG), ("objects", stat.S_ISDIR),
                                                               ("refs", stat.S_ISDIR))):
        return folder, ""
    return None, ""


def _is_plain(path: Path, want) -> bool:
    try:
        return bool(want(os.lstat(path).st_mode))
    except OSError:
        return False


def _open_dir(parent: int | None, name: str) -> int:
    return os.open(name, _DIR_FLAGS, dir_fd=parent) if parent is not None else os.open(name, _DIR_FLAGS)


@contextlib.contextmanager
def _opened(path: Path) -> Iterator[int]:
    fd = _open_dir(None, str(path))
    try:
        yield fd
    finally:
        os.close(fd)


def _read_beneath(root_fd: int, rel: str, limit: int) -> bytes | None:
    """The regular file ``rel`` below ``root_fd``, reached without following a link; None
    when it is missing, not a regular file or over ``limit`` bytes."""
    parts = rel.split("/")
    fds = []
    try:
        parent = root_fd
        for part in parts[:-1]:
            fds.append(_open_dir(parent, part))
            parent = fds[-1]
        fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=parent)
        fds.append(fd)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        return os.read(fd, limit + 1)[:limit]
    except OSError:
        return None
    finally:
        for fd in reversed(fds):
            os.close(fd)


def _valid_refname(name: str) -> bool:
    """A ref name as ``git check-ref-format`` allows it, under ``refs/``."""
    if not name.startswith("refs/") or ".." in name or "@{" in name or _BAD_REF_CHARS.search(name):
        return False
    return all(problem_in_name(part) is None and not part.startswith(".") and not part.endswith(".lock")
               for part in name.split("/"))


def read_head(git_dir: Path) -> str:
    """The commit a repository's HEAD names, read from its files as data (``HEAD``, loose
    refs, ``packed-refs``; never through a link); GitError when there is none."""
    with _opened(git_dir) as root:
        text = _read_beneath(root, "HEAD", 4096)
        for _ in range(5):  # symbolic refs, at most this deep
            if text is None:
                raise GitError("the repository has no HEAD")
            text = text.strip()
            if _HEX.match(text):
                return text.decode("ascii")
            if not text.startswith(b"ref:"):
                raise GitError("the repository's HEAD is not a commit or a ref")
            ref = text[4:].strip().decode("utf-8", "replace")
            if not _valid_refname(ref):
                raise GitError(f"the repository's HEAD names an invalid ref {shown(ref)!r}")
            text = _read_beneath(root, ref, 4096)
            if text is None:
                text = _packed_ref(root, ref)
                if text is None:
                    raise GitError("the repository has no commits")
        raise GitError("the repository's HEAD is a chain of symbolic refs")


def _packed_ref(root: int, ref: str) -> bytes | None:
    data = _read_beneath(root, "packed-refs", 64 << 20)
    for line in (data or b"").splitlines():
        sha, _, name = line.partition(b" ")
        if name.decode("utf-8", "replace") == ref and _HEX.match(sha):
            return sha
    return None


def origin_url(git_dir: Path) -> str:
    """``remote.origin.url`` of a repository, read from its ``config`` as text (no include,
    no git): what ``grade ci`` records to tell two forks apart.  "" when there is none."""
    with _opened(git_dir) as root:
        data = _read_beneath(root, "config", 1 << 20)
    section = ""
    for raw in (data or b"").decode("utf-8", "replace").splitlines():
        line = raw.strip()
        if line.startswith("["):
            section = re.sub(r"\s+", " ", line.split("]", 1)[0][1:].strip()).lower()
            continue
        key, eq, value = line.partition("=")
        if eq and section in ('remote "origin"', "remote.origin") and key.strip().lower() == "url":
            value = value.split(" #", 1)[0].split(" ;", 1)[0].strip()
            if len(value) >= 2 and value[0] == value[-1] == '"':
                value = value[1:-1]
            return shown(value)  # it ends up in labels and reports: nothing unprintable as is
    return ""


class _Budget:
    def __init__(self, limit: int):
        self.limit, self.used = limit, 0

    def take(self, n: int) -> None:
        self.used += n
        if self.used > self.limit:
            raise GitError(f"the repository's objects are over {self.limit >> 20} MiB, the most the grader "
                           f"copies; grade a smaller repository (or a fresh clone of it)")


def import_local(git_dir: Path, dest: Path, *, shown_as: str = "") -> tuple[Store, str]:
    """Copy the objects of the learner's repository ``git_dir`` into a new grader-owned
    bare repository ``dest``; returns (the store, the commit HEAD names).  See the module
    docstring: nothing of ``git_dir`` but object files and ref files is read, no link is
    followed, and git never runs there."""
    head = read_head(git_dir)
    store = Store.create(dest, sha256=len(head) == 64, shown_as=shown_as or str(git_dir))
    budget = _Budget(MAX_REPOSITORY_BYTES)
    with _opened(git_dir) as root:
        try:
            objects = _open_dir(root, "objects")
        except OSError:
            raise GitError("the repository has no objects folder (or it is a link)") from None
        try:
            _import_packs(objects, store, budget)
            _import_loose(objects, dest / "objects", len(head) == 64, budget)
        finally:
            os.close(objects)
        borrowed = _read_beneath(root, "objects/info/alternates", 1 << 16) is not None
    got = store.read(head, 1 << 20)
    if got is None or got[0] != "commit":
        store.close()
        why = (" (it borrows objects from another repository through objects/info/alternates, which the grader "
               "does not follow: clone it without --shared or --reference)" if borrowed else "")
        raise GitError(f"the commit HEAD names ({head[:12]}) is not in the repository's objects{why}")
    store.run("update-ref", "refs/grade/head", head)
    return store, head


def _import_packs(objects: int, store: Store, budget: _Budget) -> None:
    try:
        pack_dir = _open_dir(objects, "pack")
    except OSError:
        return
    try:
        for name in sorted(os.listdir(pack_dir)):
            if not re.fullmatch(r"pack-[0-9a-f]{40,64}\.pack", name):
                continue
            try:
                fd = os.open(name, _FILE_FLAGS, dir_fd=pack_dir)
            except OSError:
                continue  # a link or something unreadable: its objects are simply not there
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode):
                    continue
                budget.take(st.st_size)
                os.set_blocking(fd, True)
                # index-pack reads the pack from the descriptor and checks every object as it
                # indexes it (as for a pack received over the network); its .idx is the grader's
                try:
                    store.run("index-pack", "--stdin", stdin=fd)
                except GitError as exc:
                    raise GitError(f"a pack of the repository is damaged ({exc})") from None
            finally:
                os.close(fd)
    finally:
        os.close(pack_dir)


def _import_loose(objects: int, dest_objects: Path, sha256: bool, budget: _Budget) -> None:
    """Loose objects whose inflated contents hash to their names, copied as they are."""
    rest = 62 if sha256 else 38
    digest = hashlib.sha256 if sha256 else hashlib.sha1
    count = 0
    for folder in sorted(os.listdir(objects)):
        if not re.fullmatch(r"[0-9a-f]{2}", folder):
            continue
        try:
            sub = _open_dir(objects, folder)
        except OSError:
            continue
        try:
            for name in sorted(os.listdir(sub)):
                if len(name) != rest or not re.fullmatch(r"[0-9a-f]+", name):
                    continue
                count += 1
                if count > MAX_LOOSE_OBJECTS:
                    raise GitError(f"the repository has over {MAX_LOOSE_OBJECTS} loose objects; run `git gc` "
                                   f"in it first")
                data = _read_beneath(sub, name, MAX_OBJECT_BYTES)
                if data is None:
                    continue
                budget.take(len(data))
                if not _loose_object_is(data, folder + name, digest):
                    continue
                with contextlib.suppress(FileExistsError):  # already in a pack
                    write_beneath(dest_objects, f"{folder}/{name}", data, 0o444)
        finally:
            os.close(sub)


def _loose_object_is(data: bytes, name: str, digest) -> bool:
    try:
        inflater = zlib.decompressobj()
        body = inflater.decompress(data, MAX_OBJECT_BYTES + 64)
        if inflater.unconsumed_tail:
            return False
    except zlib.error:
        return False
    kind, _, rest = body.partition(b" ")
    size, nul, _ = rest.partition(b"\0")
    if kind not in (b"blob", b"tree", b"commit", b"tag") or not nul or not size.isdigit():
        return False
    if int(size) != len(body) - len(kind) - len(size) - 2:
        return False
    return digest(body).hexdigest() == name


@contextlib.contextmanager
def imported(folder: Path, *, shown_as: str = "") -> Iterator[tuple[Store, str]]:
    """``import_local`` of the repository in ``folder`` into a private temporary folder,
    removed afterwards; GitError when ``folder`` holds no repository that can be read."""
    from grader.sandbox import scratch

    git_dir, why = find_repository(Path(folder))
    if git_dir is None:
        raise GitError(why or f"{folder} is not a git repository")
    tmp = scratch.make("git")
    try:
        store, head = import_local(git_dir, tmp / "objects.git", shown_as=shown_as or str(folder))
        with store:
            yield store, head
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# --- a remote repository ------------------------------------------------------------------------

def local_path_of(url: str) -> Path | None:
    """The folder a ``file://`` URL names (imported like a folder, never served by git)."""
    if url.startswith("file://"):
        from urllib.parse import unquote, urlsplit

        return Path(unquote(urlsplit(url).path))
    return None


def _network_env() -> dict[str, str]:
    """The instructor's environment (credentials, proxies, ssh keys) without what would
    point git at another repository or configuration, and without the grader's own
    settings (``GRADER_RESULT_KEY`` signs results: no helper git starts needs it)."""
    keep = {"GIT_SSH", "GIT_SSH_COMMAND", "GIT_SSH_VARIANT", "GIT_ASKPASS", "GIT_SSL_CAINFO", "GIT_SSL_CAPATH",
            "GIT_HTTP_USER_AGENT", "GIT_PROXY_COMMAND"}
    env = {k: v for k, v in os.environ.items()
           if (not k.startswith("GIT_") or k in keep) and not k.startswith("GRADER_")}
    env.update(GIT_TERMINAL_PROMPT="0", GIT_NO_REPLACE_OBJECTS="1", GIT_PROTOCOL_FROM_USER="0", LC_ALL="C")
    return env


def _network_config() -> list[str]:
    allowed = [x for p in REMOTE_PROTOCOLS for x in ("-c", f"protocol.{p}.allow=always")]
    return ["-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "protocol.allow=never",
            *allowed, "-c", "transfer.fsckObjects=true", "-c", "fetch.fsckObjects=true", "-c", "core.askPass="]


def _watched(cmd: list[str], where: Path, env: dict[str, str], cwd: str) -> None:
    """Run a clone or fetch, stopping it (and GitError) if ``where`` grows past
    ``MAX_REPOSITORY_BYTES`` or it runs past ``GIT_TIMEOUT_S``."""
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                env=env, cwd=cwd, start_new_session=True)
    except FileNotFoundError:
        raise GitError("git is not installed; install it to grade git repositories") from None
    err = bytearray()

    def drain() -> None:  # keep only the tail: git must never block on a full pipe
        for chunk in iter(lambda: proc.stderr.read1(1 << 16), b""):
            err.extend(chunk)
            del err[:-4096]

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    deadline, over = time.monotonic() + GIT_TIMEOUT_S, ""
    try:
        while proc.poll() is None:
            if usage(where, stop_bytes=MAX_REPOSITORY_BYTES)[0] > MAX_REPOSITORY_BYTES:
                over = f"the repository is over {MAX_REPOSITORY_BYTES >> 20} MiB, the most the grader fetches"
            elif time.monotonic() > deadline:
                over = f"git {_verb(cmd)} took over {GIT_TIMEOUT_S} s"
            if over:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                raise GitError(over)
            time.sleep(WATCH_INTERVAL_S)
    finally:
        reader.join(5)
        proc.stderr.close()
    if proc.returncode == 0 and usage(where, stop_bytes=MAX_REPOSITORY_BYTES)[0] > MAX_REPOSITORY_BYTES:
        raise GitError(f"the repository is over {MAX_REPOSITORY_BYTES >> 20} MiB, the most the grader fetches")
    if proc.returncode != 0:
        lines = [ln for ln in err.decode("utf-8", "replace").strip().splitlines() if ln.strip()]
        raise GitError(f"git {_verb(cmd)} failed: {shown(lines[-1]) if lines else f'exit status {proc.returncode}'}")


def fetch_remote(url: str, dest: Path) -> tuple[Store, str]:
    """A grader-owned bare repository ``dest`` holding the commit the remote's HEAD names
    (cloned, or brought up to date when ``dest`` is an earlier clone); returns (store, commit).

    The clone is partial (``--filter``: blobs over ``MAX_FILE_BYTES`` stay on the server);
    a blob it lacks is never fetched later behind the grader's back (the repository is not
    marked partial once fetched, and ``Store`` allows no protocol at all): it is simply
    missing, which ``read_commit`` reports as too large."""
    env = _network_env()
    shallow = ["--depth", "1", f"--filter=blob:limit={MAX_FILE_BYTES}"]
    if dest.exists():
        try:
            Store(dest).run("config", "remote.origin.url", url)
            Store(dest).run("config", "remote.origin.promisor", "true")  # a partial clone only while fetching
            _watched(["git", *_network_config(), "--git-dir", str(dest), "fetch", "--quiet", "--force", "--no-tags",
                      *shallow, "origin", "+HEAD:refs/grade/head"], dest, env, str(dest))
        except GitError:
            shutil.rmtree(dest, ignore_errors=True)  # an older or broken clone: start over
    if not dest.exists():
        partial = dest.with_name(dest.name + ".partial")  # a clone cut short is never mistaken for one
        shutil.rmtree(partial, ignore_errors=True)
        try:
            _watched(["git", *_network_config(), "clone", "--quiet", "--bare", "--no-tags", "--template=", *shallow,
                      "--", url, str(partial)], partial, env, "/")
            Store(partial).run("update-ref", "refs/grade/head", "HEAD")
        except GitError as exc:
            shutil.rmtree(partial, ignore_errors=True)
            if "update-ref" in str(exc):
                raise GitError("the repository has no commits") from None
            raise
        partial.rename(dest)
    store = Store(dest, shown_as=url)
    # Read as a partial clone, git would fetch a missing blob on demand (or die without the
    # network): it is not one, so a blob left on the server is simply missing.
    for key in ("remote.origin.promisor", "remote.origin.partialclonefilter", "extensions.partialclone"):
        with contextlib.suppress(GitError):
            store.run("config", "--unset-all", key)
    try:
        commit = store.run("rev-parse", "--verify", "--quiet", "refs/grade/head^{commit}").decode().strip()
    except GitError:
        commit = ""
    if not commit:
        raise GitError("the repository has no commits")
    return store, commit


# --- the course's own repository ------------------------------------------------------------------

def in_course_repository(root: Path, *args: str, timeout: float = 30) -> bytes | None:
    """``git -C root <args>`` in the course's own repository (the instructor's, with the
    instructor's configuration): its output, or None when git fails.  Never for a learner's."""
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, timeout=timeout,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None
