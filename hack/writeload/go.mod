module admitter.dev/hack/writeload

go 1.26
