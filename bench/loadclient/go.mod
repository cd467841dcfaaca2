module pinproxy.bench/loadclient

go 1.19
