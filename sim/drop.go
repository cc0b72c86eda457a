package sim

// lose counts a dropped request (rejected by a full queue, timed out, or
// lost with its process) of gen tokens (LLM; 0 otherwise) of which
// produced had come out. Under an ITL SLO the request is not one missed
// observation but every one it will never make: each of its tokens after
// the first that it had not produced (all gen-1 of them before its first
// token), as many as serving it late could have cost, and at least one
// (a one-token request, or one timed out at its last token, still
// failed). Dropping a stream then never judges better than serving it
// slowly.
func (t *tenant) lose(gen, produced int) {
	t.dropped++
	if t.judgesITL() {
		t.droppedTokens += max(1, gen-max(produced, 1))
	}
}

// loseSeqs counts every running LLM sequence as dropped; the caller
// clears them.
func (t *tenant) loseSeqs() {
	for i := range t.seqs {
		t.lose(t.seqs[i].gen, t.seqs[i].done)
	}
}

// loseQueued counts every queued request as dropped; the caller clears
// the queue.
func (t *tenant) loseQueued() {
	if !t.judgesITL() {
		t.dropped += t.queued() // no tokens to count: one each
		return
	}
	for i := t.qhead; i < len(t.queue); i++ {
		t.lose(t.queue[i].gen, t.queue[i].done)
	}
}

// timeOut counts a request whose client gave up (see lose): a failure.
func (t *tenant) timeOut(gen, produced int) {
	t.timedOut++
	t.lose(gen, produced)
}

// failQueued fails every queued request (the service is stopped).
func (t *tenant) failQueued() {
	t.loseQueued()
	t.queue = t.queue[:0]
	t.qhead = 0
}

// drop loses all queued and in-flight work (the process exited).
func (t *tenant) drop() {
	t.failQueued()
	t.loseSeqs()
	t.seqs = t.seqs[:0]
	t.job = job{}
}
