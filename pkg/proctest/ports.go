package proctest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Ports are taken from [lowestPort, the ephemeral range's start).
const lowestPort = 10000

var (
	portsMu sync.Mutex
	given   = map[int]bool{} // ports FreePort handed out in this program
)

// FreePort is a TCP port on 127.0.0.1 that nothing listens on now, below
// the kernel's ephemeral range (so that no listen(":0") and no outgoing
// connection on the machine is given it while its process is down between a
// kill and a restart), and never one it returned before in this program.
func FreePort() (int, error) {
	top := ephemeralStart()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		port := lowestPort + rand.IntN(top-lowestPort)
		if given[port] {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		ln.Close()
		given[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("proctest: no free port below %d after 1000 tries", top)
}

// FreeAddr is "127.0.0.1:<FreePort>".
func FreeAddr() (string, error) {
	port, err := FreePort()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}

// ephemeralStart is the first port of Linux's ip_local_port_range, or the
// IANA range's 49152 where that cannot be read.
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > lowestPort+1000 {
				return n
			}
		}
	}
	return 49152
}
