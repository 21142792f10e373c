// Command etcd is upstream etcd's entry point, built at the version pinned in go.mod.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
