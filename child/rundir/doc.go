// Package rundir owns the directories the daemon creates (run directories,
// warm children's, the fork server's staging directory, and whatever a later
// feature adds): their names, their registration with the watchdog, their
// removal, the start-up sweep of those a dead daemon left behind, and their
// measure (Measure: the disk budget's).
//
// A directory's name is opaque, coderun-<26 random base32 characters>, since
// the program that runs in it sees its full path. Create makes it in this
// process's home in the parent (home_linux.go), a directory named the same
// way that holds an owner record: "<pid> <start> <pidns>", where pid is the
// creating daemon's process id, start its start time (/proc/<pid>/stat
// field 22) and pidns the inode of its pid namespace. The owner is in the
// home, not in the directory, because the program may delete or rewrite any
// file of its own directory; tier sandbox never grants it the home.
//
// Make creates a directory as Create does and returns it held open (Dir):
// the daemon reads, writes, copies and removes a run's or session's
// directory only through that descriptor, never through its path again, so
// a program that renames the directory or puts a link at its name cannot
// redirect the daemon (docs/containment.md §5).
//
// Create registers each directory with the installed watcher (the watchdog,
// through spawn.Watcher: one short pipe write) and Remove unregisters it, so
// that the watchdog removes what is left when the daemon dies, however it
// dies. A new kind of directory (a session's, say) needs nothing more than
// Create and Remove. Sweep removes, at start-up, the directories whose owner
// is gone (both killed at once, a machine reset) and never those of a live
// daemon.
package rundir
