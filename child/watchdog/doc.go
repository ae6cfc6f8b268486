//go:build linux

// Package watchdog makes "a crashed daemon leaves no child behind" hold for
// every process group the daemon starts: Start re-executes this binary as a
// watchdog process that outlives the daemon and SIGKILLs every group still
// registered when the daemon dies, then removes every directory still
// registered (watchdog_linux.go for the daemon's side, main_linux.go for the
// watchdog process, groups_linux.go for the records they exchange,
// dirs_linux.go for the directories). child.Start and a fork server's Spawn
// register groups, and rundir.Create directories, through spawn.Watcher, so
// neither the supervisor nor the session imports this package.
//
// The watchdog process runs only in a binary whose main (or TestMain) calls
// reexec.Dispatch first; HelperMain is that hook.
package watchdog
