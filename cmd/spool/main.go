// Command spool is being written; this placeholder keeps the module building.
package main

import "os"

func main() { os.Stderr.WriteString("spool: not built yet\n"); os.Exit(2) }
