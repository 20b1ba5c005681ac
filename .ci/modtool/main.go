// Command modtool checks the layout of the repository's Go modules and
// builds a file-system module proxy from them, so that CI can build an
// application the way a user would: against released versions, not the
// local go.work.
//
//	modtool check  -repo DIR                  # requirements, replaces, internal imports
//	modtool proxy  -repo DIR -out PROXYDIR    # module zips at their declared versions
//	modtool extract -repo DIR -out DIR -proxy PROXYDIR
//	                                          # each published module's zip, unpacked into DIR/<module dir>
//	modtool list   -repo DIR                  # "dir path version" of every published module
//
// The versions come from .ci/versions.txt. The tool lives in its own module
// so that golang.org/x/mod never enters the core module's requirements.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	repo := fs.String("repo", ".", "repository root")
	out := fs.String("out", "", "directory to create (proxy, extract)")
	proxy := fs.String("proxy", "", "proxy directory written by proxy (extract)")
	fs.Parse(os.Args[2:])

	mods, err := loadRepo(*repo)
	if err != nil {
		fail(err)
	}
	switch os.Args[1] {
	case "check":
		errs := check(mods)
		for _, e := range errs {
			fmt.Fprintln(os.Stderr, "modtool:", e)
		}
		if len(errs) > 0 {
			os.Exit(1)
		}
		fmt.Printf("modtool: %d modules: requirements, replaces and internal imports are consistent\n", len(mods))
	case "proxy":
		if *out == "" {
			usage()
		}
		if err := writeProxy(mods, *out); err != nil {
			fail(err)
		}
	case "extract":
		if *out == "" || *proxy == "" {
			usage()
		}
		if err := extract(mods, *proxy, *out); err != nil {
			fail(err)
		}
	case "list":
		for _, m := range mods {
			if m.Published() {
				fmt.Println(m.Dir, m.Path, m.Version)
			}
		}
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: modtool check|proxy|extract|list -repo DIR [-out DIR] [-proxy PROXYDIR]")
	os.Exit(2)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "modtool:", err)
	os.Exit(1)
}
