module github.com/ckptfs/ckptfs

go 1.26

require (
	github.com/klauspost/compress v1.20.3
	github.com/sirupsen/logrus v1.10.2
	github.com/spf13/cobra v1.10.2
)

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	golang.org/x/sys v0.13.0 // indirect
)
