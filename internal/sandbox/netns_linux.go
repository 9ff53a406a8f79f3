package sandbox

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// enterEmptyNetNS moves the calling (locked, disposable) thread into a new,
// empty network namespace and brings its loopback up. A child forked from
// the thread inherits it: it has no route to the host or the internet, so
// TCP, UDP and raw sockets all fail to reach anything outside the run, while
// servers the run starts on 127.0.0.1 still work among its own processes.
// Landlock alone cannot do this: it does not cover UDP or raw sockets on
// this ABI.
func enterEmptyNetNS() error {
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("unshare network namespace: %w", err)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("loopback ifreq: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("get loopback flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring loopback up: %w", err)
	}
	return nil
}
