module github.com/ethosbuilding/primeflow/streams

go 1.26.8
