module github.com/pyexec/pyexec

go 1.26.8

require (
	github.com/BurntSushi/toml v1.6.0 // indirect
	github.com/joho/godotenv v1.5.1 // indirect
	github.com/landlock-lsm/go-landlock v0.11.2 // indirect
	github.com/modelcontextprotocol/go-sdk v1.8.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	kernel.org/pub/linux/libs/security/libcap/psx v1.2.78 // indirect
)
