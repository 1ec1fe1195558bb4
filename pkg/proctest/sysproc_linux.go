package proctest

import "syscall"

// sysProcAttr puts the process in a group of its own, so that Kill takes
// whatever it started too, and kills it when the program that started it
// dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
