module github.com/coderun-rpc/coderun-rpc

go 1.26.0

require (
	github.com/kelseyhightower/envconfig v1.4.0
	golang.org/x/sys v0.50.0
)
