/*
 * kerberos_tickets.h — a SASL GSSAPI client's Kerberos tickets, fetched before the connection.
 *
 * MIT Kerberos waits for a KDC by fixed timeouts of its own (MIT 1.20 has no setting for
 * them): a KDC that accepts a request and never answers holds each request for about 27 s.
 * Were that wait in the ZooKeeper C client's I/O thread (Cyrus SASL's GSSAPI step at the
 * connection), start() would miss its timeout and stop()/close(), which join that thread,
 * would wait for MIT.  So before a GSSAPI session opens a handle, a detached thread of this
 * file gets the tickets the handle will need (the ticket-granting ticket, from the client
 * keytab when the cache has none, and service/host for every host of the hosts string,
 * GSSAPI's own way: MIT stores them in the default ticket cache), and the handle's SASL step
 * then finds them there without asking the KDC.
 *
 * A KDC that accepts and never answers makes MIT give up after its timeouts; the fetch then
 * asks again (fetch_until_answered), so that no SASL step meets that KDC, until the session
 * stops waiting.
 *
 * The thread owns its copy of what it needs and nothing of the session: the session stops
 * waiting for it whenever it likes (zkl_kerberos_tickets_release) and the thread frees
 * everything when MIT returns.  A fetch that fails (a KDC down, a principal unknown) is not
 * an error here: the handle opens and its SASL step fails the same way, with MIT's words.
 *
 * Only with ZKL_HAVE_KRB5; without it zkl_kerberos_tickets_start() returns NULL (nothing to
 * wait for) and the handle's SASL step asks the KDC itself.
 */
#ifndef ZKL_KERBEROS_TICKETS_H
#define ZKL_KERBEROS_TICKETS_H

typedef struct zkl_kerberos_tickets zkl_kerberos_tickets;

/* Starts fetching service/host tickets for the hosts of hosts ("h1:p1,h2:p2/chroot"); NULL
 * when there is nothing to wait for (no Kerberos in this build, out of memory, no thread). */
zkl_kerberos_tickets *zkl_kerberos_tickets_start(const char *service, const char *hosts);

/* 1 once the fetch has ended (tickets cached, or MIT gave up), else 0. */
int zkl_kerberos_tickets_done(zkl_kerberos_tickets *t);

/* The caller stops waiting: the thread frees the fetch when it ends (at once if it has). */
void zkl_kerberos_tickets_release(zkl_kerberos_tickets *t);

#endif
