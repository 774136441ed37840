module chainedge/gonode

go 1.19
