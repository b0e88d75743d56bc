package integration

import "golang.org/x/sys/unix"

func syscallGetxattr(path, name string, buf []byte) (int, error) {
	return unix.Getxattr(path, name, buf)
}
