module github.com/ckptfs/ckptfs

go 1.26

require (
	github.com/hanwen/go-fuse/v2 v2.12.1
	github.com/klauspost/compress v1.20.3
	github.com/schollz/progressbar/v3 v3.19.1
	github.com/sirupsen/logrus v1.10.2
	github.com/spf13/cobra v1.10.2
	github.com/spf13/pflag v1.0.10
	go.etcd.io/bbolt v1.5.0
	golang.org/x/sys v0.46.0
)

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/mitchellh/colorstring v0.0.0-20190213212951-d06e56a500db // indirect
	github.com/rivo/uniseg v0.4.7 // indirect
	golang.org/x/term v0.44.0 // indirect
)
