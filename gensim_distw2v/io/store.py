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

The dispatcher keeps its progress records in one store, each shard its rows in another
(:mod:`gensim_distw2v.dispatcher`, :mod:`gensim_distw2v.shard`): a cluster checkpoint is the
dispatcher's record of number ``n`` and every shard's checkpoint ``n``, the record written last.
"""
import errno
import hashlib
import json
import logging
import os
import re
import shutil
import stat
import uuid

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
    except (OSError, ValueError) as err:
        raise CheckpointError(f"{what} ({err})") from None


def _digest(path):
    """BLAKE2b (16 bytes) of a regular file, hex."""
    h = hashlib.blake2b(digest_size=16)
    with _open_regular(path) as fin:
        for block in iter(lambda: fin.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _fsync_dir(path):
    """Flush a folder's entries (new or renamed files) to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_file(path, write):
    """Write a file with ``write(fout)``, flushed to disk."""
    with open(path, "wb") as fout:
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
    """

    def __init__(self, directory, name, keep=2):
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(f"checkpoint name must be letters, digits and _.- (at most 128), got {name!r}")
        if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 2):
            raise ValueError(f"keep must be an int >= 2 (the newest checkpoint may be cut short), got {keep!r}")
        self.root = os.path.join(os.fspath(directory), name)
        self.name, self.keep = name, keep
        os.makedirs(self.root, exist_ok=True)

    def sequences(self):
        """The sequence numbers of the checkpoints on disk, oldest first (whole or not)."""
        found = []
        for entry in os.listdir(self.root):
            match = _FOLDER.match(entry)
            if match and os.path.isdir(os.path.join(self.root, entry)):
                found.append(int(match.group(1)))
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
        tmp = os.path.join(self.root, f".tmp-{sequence:08d}-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        os.makedirs(tmp)
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

    def read(self, sequence, expect=None):
        """Checkpoint ``sequence``, checked: ``(meta, arrays)``.

        Parameters
        ----------
        sequence : int
        expect : dict, optional
            Metadata fields and the values they must have (``{"vocab_digest": ..., "vector_size":
            100}``): a checkpoint of another corpus, vocabulary or model is refused.

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
        arrays, meta = {}, None
        for fname, entry in manifest["files"].items():
            if not isinstance(fname, str) or fname in ("", ".", "..") or os.path.basename(fname) != fname \
                    or not isinstance(entry, dict):
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
            try:
                digest = _digest(path)
            except OSError as err:
                raise CheckpointError(f"{where}: {fname} cannot be read ({err})") from None
            if digest != entry.get("digest"):
                raise CheckpointError(f"{where}: {fname} does not match its digest (altered on disk)")
            if fname == META:
                meta = _read_json(path, f"{where}: {fname} is not JSON metadata")
                continue
            spec = entry.get("array")
            if not fname.endswith(".npy") or not isinstance(spec, dict):
                raise CheckpointError(f"{where}: {fname} is not an array file of the manifest")
            try:
                with _open_regular(path) as fin:
                    array = np.load(fin, allow_pickle=False)
            except (OSError, ValueError, EOFError) as err:
                raise CheckpointError(f"{where}: {fname} is not a numpy array file ({err})") from None
            if not isinstance(array, np.ndarray):  # a zip archive (.npz) loads as an NpzFile
                raise CheckpointError(f"{where}: {fname} is not a numpy array file (a {type(array).__name__})")
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

    def latest(self, expect=None, below=None):
        """The newest checkpoint that passes :meth:`read`'s checks, as ``(sequence, meta, arrays)``,
        or None if there is none. Checkpoints that fail are skipped with a warning; one of another
        run (``expect``) is an error, not skipped: resuming from an older one would be wrong too.
        ``below``: only checkpoints numbered below it (one above failed elsewhere).
        """
        for sequence in reversed(self.sequences()):
            if below is not None and sequence >= below:
                continue
            try:
                meta, arrays = self.read(sequence, expect)
            except CheckpointError as err:
                if err.code is errors.Code.OTHER_RUN:
                    raise
                logger.warning("skipping checkpoint %i of %s: %s", sequence, self.name, err)
                continue
            return sequence, meta, arrays
        return None


def shard_store(directory, index, count):
    """The store of shard ``index`` of ``count``'s rows (kept until the dispatcher's records no
    longer name them)."""
    return CheckpointStore(directory, f"shard-{index}-of-{count}", keep=None)


def identity_differences(theirs, ours):
    """The fields of two runs' identities (the checkpoint's, this call's) that differ, as
    ``"name (checkpoint: x, this call: y)"`` strings."""
    out = []
    for key in sorted(set(theirs) | set(ours)):
        if theirs.get(key) != ours.get(key):
            out.append(f"{key} (checkpoint: {str(theirs.get(key))[:80]}, this call: {str(ours.get(key))[:80]})")
    return out
