#include "services/worker/server/admitted_tickets.h"

#include <gtest/gtest.h>

namespace kvfleet::worker {
namespace {

v1::PlacementTicket Ticket(uint64_t router, uint64_t ticket) {
  v1::PlacementTicket t;
  t.set_router(router);
  t.set_ticket(ticket);
  return t;
}

TEST(AdmittedTicketsTest, KeepsEachRoutersNewestTicketMostRecentFirst) {
  AdmittedTickets admitted;
  admitted.Record(Ticket(1, 5));
  admitted.Record(Ticket(2, 3));
  admitted.Record(Ticket(1, 4));  // arrived late: tickets only move forward
  const std::vector<v1::PlacementTicket> s = admitted.Snapshot();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].router(), 1u);
  EXPECT_EQ(s[0].ticket(), 5u);
  EXPECT_EQ(s[1].router(), 2u);
  EXPECT_EQ(s[1].ticket(), 3u);
}

TEST(AdmittedTicketsTest, RequestsWithoutATicketAreIgnored) {
  AdmittedTickets admitted;
  admitted.Record(v1::PlacementTicket());
  EXPECT_EQ(admitted.size(), 0);
}

TEST(AdmittedTicketsTest, AFloodOfRoutersCannotGrowItPastTheCap) {
  AdmittedTickets admitted(4);
  for (uint64_t router = 1; router <= 10000; ++router) admitted.Record(Ticket(router, 1));
  EXPECT_EQ(admitted.size(), 4);
  const std::vector<v1::PlacementTicket> s = admitted.Snapshot();
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].router(), 10000u);  // the least recently seen went first
  EXPECT_EQ(s[3].router(), 9997u);
}

}  // namespace
}  // namespace kvfleet::worker
