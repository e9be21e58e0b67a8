/*
 * bench_rbtree.h - a plain intrusive red-black tree for the vabench baselines.
 *
 * The baselines (busywalk, listfit) need an ordered tree with parent pointers so
 * they can walk to the next/previous node the way the kernel's rb_next/rb_prev did.
 * The caller searches and links a new node itself (bench_rb_link), then asks the
 * tree to rebalance; this keeps the comparison function out of the tree code.
 */
#ifndef BENCH_RBTREE_H
#define BENCH_RBTREE_H

#include <stdbool.h>
#include <stddef.h>

struct bench_rb_node {
	struct bench_rb_node *parent, *left, *right;
	bool red;
};

struct bench_rb_root {
	struct bench_rb_node *node;
};

#define bench_rb_entry(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* Put node at *link (a NULL child pointer of parent, or the root pointer) and rebalance. */
void bench_rb_insert(struct bench_rb_root *root, struct bench_rb_node *parent,
		     struct bench_rb_node **link, struct bench_rb_node *node);

/* Remove node from the tree and rebalance. */
void bench_rb_erase(struct bench_rb_root *root, struct bench_rb_node *node);

/* Lowest node, or NULL. */
struct bench_rb_node *bench_rb_first(const struct bench_rb_root *root);

/* Highest node, or NULL. */
struct bench_rb_node *bench_rb_last(const struct bench_rb_root *root);

/* In-order successor, or NULL. */
struct bench_rb_node *bench_rb_next(const struct bench_rb_node *node);

/* In-order predecessor, or NULL. */
struct bench_rb_node *bench_rb_prev(const struct bench_rb_node *node);

/* Check colours, parent links and equal black heights; returns 0 or -1. */
int bench_rb_check(const struct bench_rb_root *root);

#endif
