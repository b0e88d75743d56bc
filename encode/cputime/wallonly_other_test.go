//go:build !linux

package cputime

const wallOnly = true
