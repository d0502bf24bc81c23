// Command spoold is being written; this placeholder keeps the module building.
package main

import "os"

func main() { os.Stderr.WriteString("spoold: not built yet\n"); os.Exit(2) }
