module github.com/coderun-rpc/coderun-rpc

go 1.26.0

require (
	github.com/kelseyhightower/envconfig v1.4.0
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
	golang.org/x/sys v0.50.0
)

require golang.org/x/text v0.14.0 // indirect
