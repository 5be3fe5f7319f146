"""A FUSE layer that loses everything not fsynced at a simulated power cut.

    python -m tests.reliability.lossy_fs BACKING MOUNTPOINT --cut-at K [--torn SEED]

The mounted directory (flat: regular files only, which is all an audit
directory holds) behaves like a disk with a volatile cache.  Writes, new
files and truncations change only the in-memory view.  `fsync` of a file
makes its current bytes durable; `fsync` of the directory makes its current
entries durable (a new file whose directory was never fsynced vanishes at the
cut, as on a real file system).  BACKING always holds exactly the durable
state: it is what the disk holds after the power comes back.

The K-th mutating operation (create, write, truncate, fsync, fsyncdir) is the
cut: it is not performed, BACKING is left with the durable state (with
--torn, plus a seeded random prefix of the bytes appended since the last
fsync of each file, as a disk may keep part of its cache), "cut" is printed
on stdout, and every later operation hangs, so nothing that depends on an
un-synced write can return to the caller.  The test then kills the caller and
this process and unmounts.  "mounted" is printed once the mount is up.
"""

from __future__ import annotations

import argparse
import errno
import os
import random
import stat
import sys
import time
from pathlib import Path

import pyfuse3
import trio

ROOT = pyfuse3.ROOT_INODE
MUTATING = ("create", "write", "truncate", "fsync", "fsyncdir")


class Node:
    def __init__(self, inode: int, name: bytes, data: bytes, mode: int, *, durable: bool) -> None:
        self.inode = inode
        self.name = name
        self.data = bytearray(data)
        self.synced = bytes(data)  # what an fsync of this file made durable
        self.mode = mode
        self.durable_entry = durable  # the directory entry survives a cut
        self.mtime_ns = time.time_ns()


class LossyFs(pyfuse3.Operations):
    def __init__(self, backing: Path, cut_at: int, torn_seed: int | None) -> None:
        super().__init__()
        self.backing = backing
        self.cut_at = cut_at
        self.torn = random.Random(torn_seed) if torn_seed is not None else None
        self.ops = 0
        self.counts = dict.fromkeys(MUTATING, 0)
        self.is_cut = False
        self.nodes: dict[int, Node] = {}
        self.by_name: dict[bytes, int] = {}
        self.handles: dict[int, tuple[int, int]] = {}  # fh -> (inode, open flags)
        self.next_fh = 1
        next_inode = ROOT + 1
        for entry in sorted(os.listdir(backing)):
            path = backing / entry
            if path.is_file():
                node = Node(next_inode, os.fsencode(entry), path.read_bytes(),
                            stat.S_IMODE(path.stat().st_mode), durable=True)
                self.nodes[next_inode] = node
                self.by_name[node.name] = next_inode
                next_inode += 1
        self.next_inode = next_inode

    # -- the cut -------------------------------------------------------------

    async def mutating(self, kind: str) -> None:
        if self.is_cut:
            await trio.sleep_forever()
        self.ops += 1
        if self.ops >= self.cut_at:
            self.is_cut = True
            self.power_cut()
            print(f"cut {kind} {self.ops} {self.counts}", flush=True)
            await trio.sleep_forever()
        self.counts[kind] += 1

    def power_cut(self) -> None:
        if self.torn is None:
            return
        for node in self.nodes.values():
            extra = bytes(node.data[len(node.synced):]) if node.data.startswith(
                node.synced) else b""
            if node.durable_entry and extra:
                keep = self.torn.randint(0, len(extra))
                with open(self.backing / os.fsdecode(node.name), "ab") as handle:
                    handle.write(extra[:keep])

    def persist(self, node: Node, before: bytes | None) -> None:
        """Make BACKING's copy of `node` its synced bytes (`before`: what it held)."""
        path = self.backing / os.fsdecode(node.name)
        if before is not None and node.synced.startswith(before):
            with open(path, "ab") as handle:
                handle.write(node.synced[len(before):])
        else:
            path.write_bytes(node.synced)
        os.chmod(path, node.mode)

    # -- attributes ----------------------------------------------------------

    def attrs(self, inode: int) -> pyfuse3.EntryAttributes:
        entry = pyfuse3.EntryAttributes()
        entry.st_ino = inode
        entry.entry_timeout = 0
        entry.attr_timeout = 0
        if inode == ROOT:
            entry.st_mode = stat.S_IFDIR | 0o700
            entry.st_nlink = 2
            entry.st_size = 0
            stamp = time.time_ns()
        else:
            node = self.node(inode)
            entry.st_mode = stat.S_IFREG | node.mode
            entry.st_nlink = 1
            entry.st_size = len(node.data)
            stamp = node.mtime_ns
        entry.st_uid = os.getuid()
        entry.st_gid = os.getgid()
        entry.st_blksize = 4096
        entry.st_blocks = (entry.st_size + 511) // 512
        entry.st_atime_ns = entry.st_mtime_ns = entry.st_ctime_ns = stamp
        return entry

    def node(self, inode: int) -> Node:
        try:
            return self.nodes[inode]
        except KeyError:
            raise pyfuse3.FUSEError(errno.ENOENT) from None

    async def getattr(self, inode: int, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        return self.attrs(inode)

    async def lookup(self, parent_inode: int, name: bytes,
                     ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        if parent_inode != ROOT or name not in self.by_name:
            if name in (b".", b"..") and parent_inode == ROOT:
                return self.attrs(ROOT)
            raise pyfuse3.FUSEError(errno.ENOENT)
        return self.attrs(self.by_name[name])

    async def setattr(self, inode: int, attr: pyfuse3.EntryAttributes,
                      fields: pyfuse3.SetattrFields, fh: int | None,
                      ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        if inode == ROOT:
            return self.attrs(ROOT)
        node = self.node(inode)
        if fields.update_size:
            await self.mutating("truncate")
            size = attr.st_size
            del node.data[size:]
            node.data.extend(bytes(size - len(node.data)))
        if fields.update_mode:
            node.mode = stat.S_IMODE(attr.st_mode)
        node.mtime_ns = time.time_ns()
        return self.attrs(inode)

    async def statfs(self, ctx: pyfuse3.RequestContext) -> pyfuse3.StatvfsData:
        data = pyfuse3.StatvfsData()
        data.f_bsize = data.f_frsize = 4096
        data.f_blocks = data.f_bfree = data.f_bavail = 1 << 20
        data.f_files = data.f_ffree = data.f_favail = 1 << 16
        data.f_namemax = 255
        return data

    async def access(self, inode: int, mode: int, ctx: pyfuse3.RequestContext) -> bool:
        return True

    # -- the directory ---------------------------------------------------------

    async def opendir(self, inode: int, ctx: pyfuse3.RequestContext) -> int:
        if inode != ROOT:
            raise pyfuse3.FUSEError(errno.ENOTDIR)
        return ROOT

    async def readdir(self, fh: int, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        for inode in sorted(self.nodes):
            if inode <= start_id:
                continue
            if not pyfuse3.readdir_reply(token, self.nodes[inode].name, self.attrs(inode), inode):
                return

    async def releasedir(self, fh: int) -> None:
        return

    async def fsyncdir(self, fh: int, datasync: bool) -> None:
        await self.mutating("fsyncdir")
        for node in self.nodes.values():
            if not node.durable_entry:
                node.durable_entry = True
                self.persist(node, None)

    async def create(self, parent_inode: int, name: bytes, mode: int, flags: int,
                     ctx: pyfuse3.RequestContext) -> tuple[pyfuse3.FileInfo,
                                                           pyfuse3.EntryAttributes]:
        if parent_inode != ROOT:
            raise pyfuse3.FUSEError(errno.ENOENT)
        if name in self.by_name:
            raise pyfuse3.FUSEError(errno.EEXIST)
        await self.mutating("create")
        node = Node(self.next_inode, name, b"", stat.S_IMODE(mode), durable=False)
        self.next_inode += 1
        self.nodes[node.inode] = node
        self.by_name[name] = node.inode
        return self.handle(node.inode, flags), self.attrs(node.inode)

    async def mknod(self, parent_inode: int, name: bytes, mode: int, rdev: int,
                    ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        raise pyfuse3.FUSEError(errno.EPERM)

    async def unlink(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        raise pyfuse3.FUSEError(errno.EPERM)  # nothing in an audit directory is ever removed

    async def rename(self, parent_inode_old: int, name_old: bytes, parent_inode_new: int,
                     name_new: bytes, flags: int, ctx: pyfuse3.RequestContext) -> None:
        raise pyfuse3.FUSEError(errno.EPERM)

    # -- files -----------------------------------------------------------------

    def handle(self, inode: int, flags: int) -> pyfuse3.FileInfo:
        fh = self.next_fh
        self.next_fh += 1
        self.handles[fh] = (inode, flags)
        return pyfuse3.FileInfo(fh=fh, direct_io=True, keep_cache=False)

    async def open(self, inode: int, flags: int, ctx: pyfuse3.RequestContext) -> pyfuse3.FileInfo:
        node = self.node(inode)
        if flags & os.O_TRUNC and node.data:
            await self.mutating("truncate")
            node.data.clear()
        return self.handle(inode, flags)

    async def read(self, fh: int, off: int, size: int) -> bytes:
        node = self.node(self.handles[fh][0])
        return bytes(node.data[off:off + size])

    async def write(self, fh: int, off: int, buf: bytes) -> int:
        inode, flags = self.handles[fh]
        node = self.node(inode)
        await self.mutating("write")
        if flags & os.O_APPEND:
            off = len(node.data)
        if off > len(node.data):
            node.data.extend(bytes(off - len(node.data)))
        node.data[off:off + len(buf)] = buf
        node.mtime_ns = time.time_ns()
        return len(buf)

    async def fsync(self, fh: int, datasync: bool) -> None:
        node = self.node(self.handles[fh][0])
        await self.mutating("fsync")
        before = node.synced
        node.synced = bytes(node.data)
        if node.durable_entry:
            self.persist(node, before)

    async def flush(self, fh: int) -> None:
        return

    async def release(self, fh: int) -> None:
        self.handles.pop(fh, None)

    async def forget(self, inode_list: object) -> None:
        return


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("backing", type=Path)
    parser.add_argument("mountpoint", type=Path)
    parser.add_argument("--cut-at", type=int, required=True)
    parser.add_argument("--torn", type=int, default=None)
    options = parser.parse_args()
    operations = LossyFs(options.backing, options.cut_at, options.torn)
    mount_options = set(pyfuse3.default_options)
    mount_options.add("fsname=bx-lossyfs")
    pyfuse3.init(operations, str(options.mountpoint), mount_options)
    print("mounted", flush=True)
    try:
        trio.run(pyfuse3.main)
    finally:
        pyfuse3.close(unmount=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
