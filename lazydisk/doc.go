// Package lazydisk is a FUSE filesystem that sits between a server under test and its
// data directory, like Jepsen's LazyFS, so that the harness can cut the power (Drop)
// and make the disk slow to sync (SetSyncDelay). Everything passes through to a backing
// directory, except what was written and not yet made durable: that is kept in this
// process's memory, where Drop can discard it.
//
// The contract:
//
//   - File data. A write goes into the file's pending extents in memory; reads see the
//     backing file overlaid with them, and stat shows the size with the pending writes
//     and truncates in it. fsync and fdatasync of a file write its pending data to the
//     backing file and sync that. Each write to a file opened O_SYNC or O_DSYNC is
//     written through and synced before it is answered. close does not make anything
//     durable. A truncate (ftruncate, truncate, open O_TRUNC, fallocate extending a
//     file) is pending too, until the file's fsync.
//   - Directory entries. Creating a file, directory, node, symlink or hard link, and
//     rename, unlink and rmdir, are done in the backing directory at once and recorded
//     in an undo log; what they took away (the file unlinked, the directory removed, the
//     file a rename replaced) is kept in a stash, a hidden directory at the backing root
//     (.lazydisk-stash, never shown through the mount). Any sync (fsync, fdatasync or
//     fsyncdir, of any file or directory) makes every change of names made before it
//     durable, as on ext4, where one fsync commits the journal: a power loss undoes the
//     latest changes of names, never an earlier one alone (a server that renames one
//     file into place and then another never finds the second renamed and not the
//     first).
//   - Drop discards every pending change: the pending data and truncates, and the
//     pending directory changes, undone latest first (a created entry vanishes, with
//     everything under it; a renamed one goes back, and the file it replaced comes back;
//     a removed one comes back with its durable content). It says what was lost, and
//     invalidates the kernel's caches of what changed before it returns, so reads
//     through the mount, page caches and mmaps included, then see the durable state.
//     A file kept open across a drop goes on working on the durable file: reads give
//     its durable content (a file whose creation was undone is still read and written
//     through the open descriptor, though no name leads to it any more). A sync waiting
//     on the delay when a drop comes fails with EIO.
//   - Slow syncs. With a delay set, every fsync, fdatasync and fsyncdir, and the sync
//     the kernel makes after each write to an O_SYNC or O_DSYNC file, waits that long
//     before it completes, and never longer than the delay in force now: setting 0
//     heals, and syncs already waiting complete at once. Reads, writes, stats and
//     everything else answer at once; but the kernel holds a file locked while its sync
//     waits, so writes to that same file wait too.
//   - Ownership and permissions are the backing directory's: a new entry belongs to the
//     caller's uid and gid (the directory's gid when it is setgid) with exactly the mode
//     asked for; chmod, chown and utimes pass through; the mount is allow_other and the
//     kernel checks permissions (default_permissions).
//   - The kernel's page cache is on (mmap works), its writeback cache is off: every
//     write reaches this process, and an mmap of a file reads the pending writes.
//   - Unmount writes the pending data back and keeps the pending entries, as a clean
//     shutdown does; a daemon killed by SIGKILL loses the pending data, keeps the
//     entries, and leaves a dead mount that Unmount(path) takes away.
//
// What is approximated: file data is made durable per file, by that file's sync (ext4's
// ordered mode may write other files' data with a journal commit too); an undo that a
// change made durable since is in the way of is skipped, and said so in Lost. A drop is meant
// for a quiet mount (the server killed first, as by the power loss): a lookup racing
// it may leave the kernel a name it undid, for up to the one-second entry cache. A
// file's mtime is its last pending write's while it has pending data, and its blocks
// are not reserved. Files removed while their directory was never synced stay in the
// stash (on the backing filesystem) until that directory's fsync, a Drop or Unmount.
// The backing directory is one filesystem that nothing else changes while it is
// served. Extended attributes, file locks across hosts (the kernel keeps locks local),
// O_TMPFILE and punching holes are not served.
//
// The lockbreaker binary runs a lazy disk as a daemon (Main: lockbreaker disk serve)
// and the harness drives it over a unix socket (Ask). Serve it in a process of its own:
// a Go process that serves a mount and also works on it can stop itself (a page fault
// on an mmap of the mount, or a child changing into it between fork and exec, holds
// the runtime that must answer). Every mount has the filesystem
// type fuse.lockbreaker-disk, by which Mounts finds them after a crash.
package lazydisk
