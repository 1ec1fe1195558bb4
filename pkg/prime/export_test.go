package prime

// Waiting is how many calls wait for their turn at c's budget.
func Waiting(c *Client) int {
	c.lim.mu.Lock()
	defer c.lim.mu.Unlock()
	return len(c.lim.queue.waiters)
}
