"""`admitter dashboard`: a read-only web view of the queues' budgets, the waiting and the
running work, updated live from watches; `admitter simulate --out` writes the same page."""
