module pinproxy.example/client

go 1.21
