//go:build tools

// Package tools pins the S3-compatible server (versitygw, Apache-2.0) that the artifact-store
// integration tests start: a real S3 protocol implementation over a POSIX directory.
package tools

import _ "github.com/versity/versitygw/cmd/versitygw"
