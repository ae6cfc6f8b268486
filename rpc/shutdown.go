package rpc

// exit: 0 if shutdown came first (waiting for its teardown and response),
// else the same teardown and 1.
func (s *Server) exit() int {
	s.mu.Lock()
	after := s.pendingShutdown
	s.mu.Unlock()
	if after {
		<-s.shutdownReplied
		return 0
	}
	s.log.Info("exit without shutdown: tearing down")
	s.w.drain()
	s.teardown()
	return 1
}

// shutdown refuses new requests now; the teardown and the null response
// follow from a goroutine so the read loop keeps routing binding answers.
func (s *Server) shutdown(id reqID) {
	s.mu.Lock()
	s.state = stateShuttingDown
	s.pendingShutdown = true
	s.pending[id.text] = true
	s.mu.Unlock()
	go func() {
		s.teardown()
		s.mu.Lock()
		delete(s.pending, id.text)
		s.mu.Unlock()
		s.w.reply(id, nil)
		close(s.shutdownReplied)
	}()
}
