//go:build tools

// Package tools pins the AWS Lambda Runtime Interface Emulator (Apache-2.0) that the lambda
// transport's tests start: the Lambda Invoke endpoint and Runtime API in front of aws-lambda-ric.
package tools

import _ "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie"
