module github.com/ethosbuilding/primeflow/sql

go 1.26.8
