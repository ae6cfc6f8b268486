// Package rundir owns the directories the daemon creates (run directories,
// warm children's, the fork server's staging directory, and whatever a later
// feature adds): their names, their registration with the watchdog, their
// removal, and the start-up sweep of those a dead daemon left behind.
//
// A directory's name says who owns it: coderun-<pid>-<start>-<pidns>-<random>,
// where pid is the creating daemon's process id, start its start time
// (/proc/<pid>/stat field 22) and pidns the inode of its pid namespace. Create
// registers each directory with the installed watcher (the watchdog, through
// spawn.Watcher: one short pipe write) and Remove unregisters it, so that the
// watchdog removes what is left when the daemon dies, however it dies. Sweep
// removes, at start-up, the directories whose owner is gone (both killed at
// once, a machine reset) and never those of a live daemon.
package rundir
