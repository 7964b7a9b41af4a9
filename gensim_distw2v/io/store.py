"""Checkpoints on disk: written atomically, read back checked, never with pickle. No network.

A :class:`CheckpointStore` keeps one role's checkpoints (the dispatcher's progress, one shard's
rows) under ``directory/name/``, each in a folder of its own::

    directory/name/ckpt-00000007/
        MANIFEST.json     what the checkpoint holds: format, sequence, each file's size and digest
        meta.json         the role's state as plain JSON (session config, epoch, counters, ...)
        <array>.npy       one numpy array per file (numpy's format, object arrays refused)

A checkpoint is written into a hidden folder beside them, every file and the folder flushed to
disk (``fsync``), then renamed into place (a rename within one file system is atomic) and the
parent folder flushed: a crash at any moment leaves either the new checkpoint whole or none of it,
and the previous one intact. Reading checks the manifest, each file's size and BLAKE2 digest, the
arrays' dtypes and shapes, and what the caller expects of the metadata (the vocabulary's digest,
the vector size, ...); a checkpoint that fails a check is skipped with a warning naming what is
wrong, and the previous one is used. The last ``keep`` checkpoints stay on disk.

Checkpoints hold the model's weights: their folders are made ``0700`` and their files ``0600``
whatever the umask, a checkpoint folder owned by another user or writable by group or others is
refused (:func:`private_dir`), temporary folders are made by :func:`tempfile.mkdtemp` and files
with ``O_EXCL | O_NOFOLLOW`` (nobody can plant a symlink to write through), and with the cluster's
HMAC key the manifest is signed (``mac``): a checkpoint swapped by whoever can write to the folder
is refused. Reads are bounded: regular files only, never through a symlink, sizes checked against
the manifest and a limit before a byte is digested, and a deadline.

The dispatcher keeps its progress records in one store, each shard its rows in another
(:mod:`gensim_distw2v.dispatcher`, :mod:`gensim_distw2v.shard`): a cluster checkpoint is the
dispatcher's record of number ``n`` and every shard's checkpoint ``n``, the record written last.
"""
import errno
import hashlib
import hmac
import io
import json
import logging
import math
import os
import re
import shutil
import stat
import tempfile
import time

import numpy as np

from gensim_distw2v.protocol import errors

logger = logging.getLogger(__name__)

FORMAT = 1  # the layout above; a store refuses checkpoints of another format
MANIFEST = "MANIFEST.json"
META = "meta.json"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")  # role and array names: safe file names
_FOLDER = re.compile(r"^ckpt-(\d{8})$")
_ALLOWED_KINDS = "biuf"  # bool, ints, floats: no objects, strings or structured arrays


class CheckpointError(errors.CheckpointUnreadable):
    """A checkpoint that cannot be used: the message says which file or field and why (its ``code``:
    ``checkpoint_unreadable``, or ``other_run`` for :class:`OtherRunError`)."""


class OtherRunError(CheckpointError):
    """A checkpoint of another run (another corpus, vocabulary or settings)."""

    CODE = errors.Code.OTHER_RUN


MAX_META_BYTES = 1 << 20  # a checkpoint's manifest and metadata are small JSON files: read no more
READ_SECONDS = 600.0  # the longest one checkpoint's read may take (a store's default deadline)
_MAC_CONTEXT = b"gensim_distw2v checkpoint manifest 1\n"


def private_dir(path, what="checkpoint_dir"):
    """Make folder ``path`` (mode ``0700``, parents as the umask says) or check the one there: a
    folder of this user's, not writable by group or others (then no one else can add, swap or
    remove what is written in it). Returns the path.

    Raises
    ------
    CheckpointError
        ``path`` is not a folder, is another user's, or group or others may write to it; the
        message names the fix.
    """
    path = os.fspath(path)
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        found = os.stat(path)
    except OSError as err:
        raise CheckpointError(f"{what} {path}: cannot make or use it ({err})") from None
    if not stat.S_ISDIR(found.st_mode):
        raise CheckpointError(f"{what} {path} is not a folder")
    if hasattr(os, "geteuid") and found.st_uid != os.geteuid():
        raise CheckpointError(f"{what} {path} belongs to another user (uid {found.st_uid}): whoever owns it can read "
                              f"or swap what is written there; give a folder of your own (or a new path)")
    if found.st_mode & 0o022:
        who = "others" if found.st_mode & 0o002 else "its group"
        raise CheckpointError(f"{what} {path} is writable by {who} ({stat.filemode(found.st_mode)}): they could swap "
                              f"what is written there; chmod go-w {path}, or give a private folder")
    return path


def tighten(path):
    """Make every folder under ``path`` ``0700`` and every file ``0600`` (what a library wrote
    there under the umask: TensorBoard's events and projector files), without following symlinks."""
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            full = os.path.join(root, name)
            if not os.path.islink(full):
                os.chmod(full, 0o700 if name in dirs else 0o600)


def _own_subdir(path):
    """Make folder ``path`` ``0700`` (an existing one, of this user's and not a symlink, is made so)."""
    try:
        os.mkdir(path, 0o700)
        return
    except FileExistsError:
        pass
    found = os.lstat(path)
    if not stat.S_ISDIR(found.st_mode) or (hasattr(os, "geteuid") and found.st_uid != os.geteuid()):
        raise CheckpointError(f"checkpoint folder {path} is not a folder of this user's (a symlink, a file, or "
                              f"another user's): refused")
    if found.st_mode & 0o077:
        os.chmod(path, 0o700)


def manifest_mac(key, manifest):
    """The HMAC-SHA256 of a manifest (without its ``mac``) under the cluster's key, hex."""
    body = json.dumps({k: v for k, v in manifest.items() if k != "mac"}, sort_keys=True).encode("utf8")
    return hmac.new(key, _MAC_CONTEXT + body, hashlib.sha256).hexdigest()


def _open_regular(path):
    """``path`` opened for reading if it is a regular file, not through a symlink (a FIFO would block
    the reader, a device or a symlink to one never end it); OSError otherwise."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _read_json(path, what):
    """A small JSON file's value; CheckpointError naming ``what`` if it is not one."""
    try:
        with _open_regular(path) as fin:
            data = fin.read(MAX_META_BYTES + 1)
        if len(data) > MAX_META_BYTES:
            raise ValueError(f"more than {MAX_META_BYTES} bytes")
        return json.loads(data.decode("utf8"))
    except (OSError, ValueError, RecursionError) as err:  # (RecursionError: JSON nested deeper than Python goes)
        raise CheckpointError(f"{what} ({type(err).__name__}: {str(err)[:200]})") from None


def _read_whole(path, size, deadline):
    """The ``size`` bytes of regular file ``path`` (never through a symlink), read by ``deadline``
    (monotonic); OSError if it holds another number of bytes or reading takes longer."""
    with _open_regular(path) as fin:
        if os.fstat(fin.fileno()).st_size != size:
            raise OSError(errno.EINVAL, f"it has {os.fstat(fin.fileno()).st_size} bytes, its manifest says {size} "
                                        f"(cut short or altered)", path)
        data = bytearray()  # (grown as read: a size the manifest claims is not allocated before it is there)
        while len(data) < size:
            block = fin.read(min(1 << 22, size - len(data)))
            if not block:
                raise OSError(errno.EINVAL, "cut short while read", path)
            data += block
            if time.monotonic() > deadline:
                raise OSError(errno.ETIMEDOUT, "reading it took past the deadline", path)
    return data


def _npy(data, what):
    """One numpy array of numbers from a ``.npy`` file's bytes (a view of them; no pickle, no zip)."""
    stream = io.BytesIO(data)
    readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
    try:
        version = np.lib.format.read_magic(stream)
        if version not in readers:
            raise ValueError(f"format version {version}")
        shape, fortran, dtype = readers[version](stream)
    except (ValueError, EOFError, TypeError) as err:
        raise CheckpointError(f"{what} is not a numpy array file ({err})") from None
    if not all(isinstance(n, int) and n >= 0 for n in shape):  # (numpy reads (-1, -1) and reshape refuses it)
        raise CheckpointError(f"{what} is not a numpy array file of numbers (shape {shape})")
    count = math.prod(shape)  # Python's integers: a crafted shape cannot wrap round to a size that fits
    if dtype.kind not in _ALLOWED_KINDS or dtype.hasobject or count * dtype.itemsize != len(data) - stream.tell():
        raise CheckpointError(f"{what} is not a numpy array file of numbers ({dtype}, {shape}, "
                              f"{len(data) - stream.tell()} bytes of data)")
    array = np.frombuffer(data, dtype=dtype, count=count, offset=stream.tell())
    return array.reshape(shape[::-1]).T if fortran else array.reshape(shape)


def _digest(path, deadline=None):
    """BLAKE2b (16 bytes) of a regular file, hex; OSError past ``deadline`` (monotonic)."""
    h = hashlib.blake2b(digest_size=16)
    with _open_regular(path) as fin:
        for block in iter(lambda: fin.read(1 << 20), b""):
            h.update(block)
            if deadline is not None and time.monotonic() > deadline:
                raise OSError(errno.ETIMEDOUT, "reading it took past the deadline", path)
    return h.hexdigest()


def _fsync_dir(path):
    """Flush a folder's entries (new or renamed files) to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_file(path, write):
    """Write a new file (``0600``, never through a symlink) with ``write(fout)``, flushed to disk."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "wb") as fout:
        write(fout)
        fout.flush()
        os.fsync(fout.fileno())


class CheckpointStore:
    """One role's checkpoints in ``directory/name``.

    Parameters
    ----------
    directory : str or os.PathLike
        The checkpoint folder the user gave (``checkpoint_dir=``); created if missing.
    name : str
        The role: ``"dispatcher"``, ``"shard-0-of-8"``, ... (letters, digits, ``_.-``).
    keep : int or None
        How many checkpoints to keep (at least 2: the newest may be the one a crash cut short);
        None: keep all until :meth:`prune` (a shard's checkpoints are kept as long as the
        dispatcher's records name them).
    key : bytes, optional
        The cluster's HMAC key: manifests are signed with it, and read back only if their
        signature is its.
    """

    def __init__(self, directory, name, keep=2, key=None):
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(f"checkpoint name must be letters, digits and _.- (at most 128), got {name!r}")
        if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 2):
            raise ValueError(f"keep must be an int >= 2 (the newest checkpoint may be cut short), got {keep!r}")
        self.root = os.path.join(private_dir(directory), name)
        self.name, self.keep, self.key = name, keep, key or None
        _own_subdir(self.root)

    def sequences(self):
        """The sequence numbers of the checkpoints on disk, oldest first (whole or not)."""
        found = []
        for entry in os.listdir(self.root):
            match = _FOLDER.match(entry)
            try:
                if match and stat.S_ISDIR(os.lstat(os.path.join(self.root, entry)).st_mode):  # (no symlinks)
                    found.append(int(match.group(1)))
            except FileNotFoundError:  # pruned meanwhile
                continue
        return sorted(found)

    def path(self, sequence):
        """The folder of checkpoint ``sequence``."""
        return os.path.join(self.root, f"ckpt-{sequence:08d}")

    def write(self, meta, arrays, sequence=None):
        """Write a checkpoint atomically and return its sequence number.

        Parameters
        ----------
        meta : dict
            The role's state, as JSON (plain data: str, int, float, bool, None, lists, dicts).
        arrays : dict of (str, numpy.ndarray)
            Arrays of numbers (bool, int, float), each written to ``<name>.npy``.
        sequence : int, optional
            Its number (a shard writes the number the dispatcher gave the cluster checkpoint; one
            already on disk, a leftover of a checkpoint never completed, is replaced). Default: one
            more than the newest on disk.

        Returns
        -------
        int
            The new checkpoint's sequence number.
        """
        for key, array in arrays.items():
            if not isinstance(key, str) or not _NAME.match(key) or key in ("MANIFEST", "meta"):
                raise ValueError(f"checkpoint array name {key!r} is not a safe file name (letters, digits, _.-)")
            if not isinstance(array, np.ndarray) or array.dtype.kind not in _ALLOWED_KINDS:
                raise ValueError(f"checkpoint array {key!r} must be a numpy array of numbers, got "
                                 f"{getattr(array, 'dtype', type(array).__name__)}")
        meta_bytes = json.dumps(meta, allow_nan=False, sort_keys=True).encode("utf8")
        if sequence is None:
            sequence = (self.sequences() or [0])[-1] + 1
        elif isinstance(sequence, bool) or not isinstance(sequence, int) or not 0 < sequence < 10 ** 8:
            raise ValueError(f"checkpoint sequence must be an int in [1, 10**8), got {sequence!r}")
        tmp = tempfile.mkdtemp(prefix=f".tmp-{sequence:08d}-{os.getpid()}-", dir=self.root)  # 0700, new
        try:
            files = {}
            _write_file(os.path.join(tmp, META), lambda fout: fout.write(meta_bytes))
            files[META] = None
            for key, array in arrays.items():
                _write_file(os.path.join(tmp, key + ".npy"),
                            lambda fout, a=array: np.save(fout, np.ascontiguousarray(a), allow_pickle=False))
                files[key + ".npy"] = {"dtype": array.dtype.str, "shape": list(array.shape)}
            manifest = {"format": FORMAT, "name": self.name, "sequence": sequence, "files": {
                fname: {"size": os.path.getsize(os.path.join(tmp, fname)), "digest": _digest(os.path.join(tmp, fname)),
                        **({"array": spec} if spec else {})} for fname, spec in files.items()}}
            if self.key:
                manifest["mac"] = manifest_mac(self.key, manifest)
            _write_file(os.path.join(tmp, MANIFEST), lambda fout: fout.write(json.dumps(manifest, indent=1).encode()))
            _fsync_dir(tmp)
            if os.path.exists(self.path(sequence)):  # a leftover of the same number, never completed
                shutil.rmtree(self.path(sequence))
            os.rename(tmp, self.path(sequence))
            _fsync_dir(self.root)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        if self.keep:
            for old in self.sequences()[:-self.keep]:
                shutil.rmtree(self.path(old), ignore_errors=True)
        logger.info("checkpoint %i of %s written to %s", sequence, self.name, self.path(sequence))
        return sequence

    def size(self, sequence):
        """Bytes on disk of checkpoint ``sequence``."""
        folder = self.path(sequence)
        return sum(os.path.getsize(os.path.join(folder, name)) for name in os.listdir(folder))

    def prune(self, below):
        """Delete the checkpoints numbered below ``below`` (and leftovers of interrupted writes)."""
        for old in self.sequences():
            if old < below:
                shutil.rmtree(self.path(old), ignore_errors=True)
        for entry in os.listdir(self.root):
            if entry.startswith(".tmp-") and f"-{os.getpid()}-" not in entry:
                shutil.rmtree(os.path.join(self.root, entry), ignore_errors=True)

    def read(self, sequence, expect=None, max_bytes=None, deadline=None):
        """Checkpoint ``sequence``, checked: ``(meta, arrays)``.

        Parameters
        ----------
        sequence : int
        expect : dict, optional
            Metadata fields and the values they must have (``{"vocab_digest": ..., "vector_size":
            100}``): a checkpoint of another corpus, vocabulary or model is refused.
        max_bytes : int, optional
            The most its files may hold together (checked on the manifest, before reading them).
        deadline : float, optional
            A :func:`time.monotonic` time: reading past it fails (default: :data:`READ_SECONDS` from now).

        Raises
        ------
        CheckpointError
            A missing, truncated or altered file, a manifest or format it does not know, an array
            of another dtype or shape than its manifest says, or metadata that differs from
            ``expect``; the message names which.
        """
        folder = self.path(sequence)
        where = f"checkpoint {folder}"
        manifest = _read_json(os.path.join(folder, MANIFEST), f"{where}: no readable {MANIFEST}")
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or manifest.get("sequence") != sequence \
                or not isinstance(manifest.get("files"), dict) or META not in manifest["files"]:
            raise CheckpointError(f"{where}: {MANIFEST} is not a format-{FORMAT} manifest of checkpoint {sequence}")
        if manifest.get("name") != self.name:
            raise CheckpointError(f"{where}: {MANIFEST} is of {str(manifest.get('name'))[:80]!r}, not of {self.name} "
                                  f"(moved from another store)")
        if self.key and not hmac.compare_digest(str(manifest.get("mac", "")).encode("utf8"),
                                                manifest_mac(self.key, manifest).encode("utf8")):
            raise CheckpointError(f"{where}: {MANIFEST} is not signed with this cluster's key (" + (
                "it carries no signature: written without a key" if "mac" not in manifest else "a wrong signature")
                + "): refused, as anyone could have written it; resume with the key it was written with")
        deadline = time.monotonic() + READ_SECONDS if deadline is None else deadline
        sizes = [entry.get("size") if isinstance(entry, dict) else None for entry in manifest["files"].values()]
        if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in sizes) \
                or manifest["files"][META].get("size", 0) > MAX_META_BYTES \
                or (max_bytes is not None and sum(sizes) > max_bytes):
            raise CheckpointError(f"{where}: {MANIFEST} lists files of {sizes} bytes: more than a checkpoint of this "
                                  f"kind holds ({max_bytes if max_bytes is not None else 'any'} bytes in all, "
                                  f"{MAX_META_BYTES} of {META})")
        arrays, meta = {}, None
        for fname, entry in manifest["files"].items():
            if not isinstance(fname, str) or fname in ("", ".", "..") or os.path.basename(fname) != fname \
                    or "\0" in fname or not isinstance(entry, dict):
                raise CheckpointError(f"{where}: {MANIFEST} names a file it may not ({fname!r})")
            path = os.path.join(folder, fname)
            try:
                found = os.lstat(path)
            except OSError:
                raise CheckpointError(f"{where}: {fname} is missing") from None
            if not stat.S_ISREG(found.st_mode):
                raise CheckpointError(f"{where}: {fname} is not a regular file (a symlink, a FIFO, a device or a "
                                      f"folder): refused")
            if found.st_size != entry.get("size"):
                raise CheckpointError(f"{where}: {fname} has {found.st_size} bytes, its manifest says "
                                      f"{entry.get('size')} (cut short or altered)")
            try:  # read once: the bytes digested are the bytes used (a file swapped meanwhile changes nothing)
                data = _read_whole(path, entry["size"], deadline)
            except OSError as err:
                raise CheckpointError(f"{where}: {fname} cannot be read ({err})") from None
            if hashlib.blake2b(data, digest_size=16).hexdigest() != entry.get("digest"):
                raise CheckpointError(f"{where}: {fname} does not match its digest (altered on disk)")
            if fname == META:
                try:
                    meta = json.loads(data.decode("utf8"))
                except (ValueError, RecursionError) as err:
                    raise CheckpointError(f"{where}: {fname} is not JSON metadata ({type(err).__name__}: "
                                          f"{str(err)[:200]})") from None
                continue
            spec = entry.get("array")
            if not fname.endswith(".npy") or not isinstance(spec, dict):
                raise CheckpointError(f"{where}: {fname} is not an array file of the manifest")
            array = _npy(data, f"{where}: {fname}")
            if array.dtype.str != spec.get("dtype") or list(array.shape) != spec.get("shape"):
                raise CheckpointError(f"{where}: {fname} is {array.dtype.str} {list(array.shape)}, its manifest says "
                                      f"{spec.get('dtype')} {spec.get('shape')}")
            arrays[fname[:-4]] = array
        for key, value in (expect or {}).items():
            if not isinstance(meta, dict) or meta.get(key) != value:
                got = meta.get(key) if isinstance(meta, dict) else None
                raise OtherRunError(f"{where} is of another run: its {key} is {got!r}, this run's is {value!r} "
                                      f"(give an empty checkpoint folder, or the same corpus and settings)")
        return meta, arrays

    def latest(self, expect=None, below=None, max_bytes=None, seconds=READ_SECONDS):
        """The newest checkpoint that passes :meth:`read`'s checks, as ``(sequence, meta, arrays)``,
        or None if there is none. Checkpoints that fail are skipped with a warning; one of another
        run (``expect``) is an error, not skipped: resuming from an older one would be wrong too.
        ``below``: only checkpoints numbered below it (one above failed elsewhere); ``max_bytes``:
        as :meth:`read`'s; ``seconds``: the deadline of the whole search.
        """
        deadline = time.monotonic() + seconds
        for sequence in reversed(self.sequences()):
            if below is not None and sequence >= below:
                continue
            try:
                meta, arrays = self.read(sequence, expect, max_bytes=max_bytes, deadline=deadline)
            except CheckpointError as err:
                if err.code is errors.Code.OTHER_RUN:
                    raise
                logger.warning("skipping checkpoint %i of %s: %s", sequence, self.name, err)
                continue
            return sequence, meta, arrays
        return None


def shard_store(directory, index, count, key=None):
    """The store of shard ``index`` of ``count``'s rows (kept until the dispatcher's records no
    longer name them)."""
    return CheckpointStore(directory, f"shard-{index}-of-{count}", keep=None, key=key)


def identity_differences(theirs, ours):
    """The fields of two runs' identities (the checkpoint's, this call's) that differ, as
    ``"name (checkpoint: x, this call: y)"`` strings."""
    out = []
    for key in sorted(set(theirs) | set(ours)):
        if theirs.get(key) != ours.get(key):
            out.append(f"{key} (checkpoint: {str(theirs.get(key))[:80]}, this call: {str(ours.get(key))[:80]})")
    return out
